/**
 * The model handle every model is: a name in a project, an inference name at an OpenAI-compatible
 * endpoint, the clients that call it (`openai()`, `fetch()`), and its metric history (`log()`,
 * `history()`). A `PromptedModel` is one that is not trained (a hosted `gpt-4o-mini`, a local base
 * model); `TrainableModel` extends it with what training needs.
 */
import path from 'node:path';
import { EventEmitter } from 'eventemitter3';
import OpenAI from 'openai';
import { DEFAULT_DATA_DIR, ENV, readEnv } from '../internal/env.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import { invalidOption, option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { captureCompletions } from '../rollout/capture-completions.js';
import { captureFetch, translatingFetch } from '../rollout/capture-fetch.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import { computeStepMetrics, prefixMetrics, type TrajectoryGroup } from '../schema/index.js';
import type { TrajectoryGroupInput } from '../schema/index.js';
import type { WaitOptions } from './backend.js';
import { checkWaitOptions } from './job-options.js';
import { parseGroup } from './batch.js';
import { appendHistoryRow, readHistory } from './history.js';
import type { HistoryRow } from './history.js';
import { assertPathSegment, modelFiles } from './model-files.js';
import type { ModelFiles } from './model-files.js';

/** Options of `new PromptedModel(...)`. */
export interface PromptedModelOptions {
  /** The handle's name, unique within its project (also a directory name: no `/`). */
  name: string;
  /** The project it belongs to (its history sits beside the trained models'). */
  project: string;
  /** The model name the endpoint knows, e.g. `gpt-4o-mini` or `policyloop/tiny-chat`. */
  model: string;
  /** Base URL of the OpenAI-compatible API, e.g. `https://api.openai.com/v1`. */
  baseURL: string;
  /**
   * The endpoint's key.
   * @default process.env.OPENAI_API_KEY
   */
  apiKey?: string | undefined;
  /**
   * Directory of the local files (history), as a backend's `dataDir`.
   * @default '.policyloop'
   */
  dataDir?: string | undefined;
  /**
   * Per-request timeout, in milliseconds.
   * @default 600_000 (the openai SDK's)
   */
  timeout?: number | undefined;
  /**
   * Retries of the openai SDK.
   * @default 2
   */
  maxRetries?: number | undefined;
  /** `fetch` for the client (tests, proxies). */
  fetch?: typeof globalThis.fetch | undefined;
}

/** Options of {@link PromptedModel.openai} (and so of `TrainableModel.openai`). */
export interface OpenAIClientOptions {
  /**
   * Pin a step: requests go to `...:step<N>` instead of the latest checkpoint (a trained model's;
   * a prompted model has one version and ignores it).
   * @default the latest step
   */
  step?: number | undefined;
  /**
   * Request parameters filled into every request where it has no value (`undefined` or `null`;
   * `model` also when it is `''`); the request's own values win. Merged over the defaults
   * `model` and `logprobs: true` (and a trained model's `chatTemplateKwargs` as `chat_template_kwargs`).
   * @default { model: model.inferenceName(step), logprobs: true }
   */
  defaults?: Readonly<Record<string, unknown>> | undefined;
  /**
   * Per-request timeout, in milliseconds.
   * @default the model's (a prompted model's `timeout`), else 600_000 (the openai SDK's)
   */
  timeout?: number | undefined;
  /**
   * Retries of the openai SDK.
   * @default the model's (a prompted model's `maxRetries`), else 2
   */
  maxRetries?: number | undefined;
}

/** Options of {@link PromptedModel.fetch} (and so of `TrainableModel.fetch`). */
export interface ModelFetchOptions {
  /**
   * Pin a step: requests that name no model go to `...:step<N>` instead of the latest checkpoint
   * (a trained model's; a prompted model ignores it).
   * @default the latest step
   */
  step?: number | undefined;
  /**
   * Request parameters filled into every chat-completions body where it has no value (`undefined`
   * or `null`; `model` also when it is `''`); the body's own values win. Merged over the defaults
   * `model` and `logprobs: true`.
   * @default { model: model.inferenceName(step), logprobs: true }
   */
  defaults?: Readonly<Record<string, unknown>> | undefined;
}

/** The name and project every model handle has. */
export const ModelNameShape = { name: option.nonEmptyString(), project: option.nonEmptyString() };

const PromptedModelSchema = optionsSchema<PromptedModelOptions>()({
  ...ModelNameShape,
  model: option.nonEmptyString(),
  baseURL: option.nonEmptyString(),
  apiKey: option.string().optional(),
  dataDir: option.nonEmptyString().optional(),
  timeout: option.timeout().optional(),
  maxRetries: option.retryCount().optional(),
  fetch: option.function<typeof globalThis.fetch>().optional(),
});

const stepShape = { step: option.integer({ min: 0 }).optional() };
const defaultsShape = { defaults: option.options<Readonly<Record<string, unknown>>>().optional() };

const OpenAIClientSchema = optionsSchema<OpenAIClientOptions>()({
  ...stepShape,
  ...defaultsShape,
  timeout: option.timeout().optional(),
  maxRetries: option.retryCount().optional(),
});

const ModelFetchSchema = optionsSchema<ModelFetchOptions>()({ ...stepShape, ...defaultsShape });

/** What {@link PromptedModel.log} records (and so `TrainableModel.log`): the groups, and where. */
export interface LogParams {
  /** The trajectory groups whose metrics are recorded. */
  groups: readonly TrajectoryGroupInput[];
  /**
   * The split the groups belong to; metric names are prefixed with it (`val/reward`).
   * @default 'val'
   */
  split?: string | undefined;
  /**
   * The step the groups were sampled at (a prompted model never changes: pass the trained
   * model's step to plot them side by side).
   * @default a trained model's current step; 0 for a prompted model
   */
  step?: number | undefined;
  /**
   * Also send the groups to the service's log endpoint (batched; a trained model's). `false`
   * writes history only.
   * @default true
   */
  send?: boolean | undefined;
}

const LogParamsSchema = optionsSchema<LogParams>()({
  groups: option.like<readonly TrajectoryGroupInput[]>(
    (value) => Array.isArray(value),
    'an array of trajectory groups',
  ),
  split: option
    .like<string>((value) => typeof value === 'string' && value !== '' && !value.includes('/'), "a name without '/'")
    .default('val'),
  ...stepShape,
  send: option.boolean().optional(),
});

/** Where a model answers chat completions. */
export interface InferenceEndpoint {
  /** Base URL of the OpenAI-compatible API (ends in `/v1`). */
  readonly baseURL: string;
  /** Its bearer key. */
  readonly apiKey: string;
  /** The `fetch` to reach it with, when one was injected. */
  readonly fetch?: typeof globalThis.fetch | undefined;
}

/** What a prompted model is constructed with, besides its name and project. */
interface PromptedEndpoint extends InferenceEndpoint {
  readonly model: string;
  readonly files: ModelFiles;
  readonly timeout: number | undefined;
  readonly maxRetries: number | undefined;
}

/** The `fetch` option type of the openai SDK. */
type OpenAIFetch = NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'];

/**
 * Passed by a subclass (`TrainableModel`) whose endpoint, inference name and files are known only
 * once it is registered: the base then checks only the name and project. Not exported from the
 * package.
 */
export const ENDPOINT_AT_REGISTRATION: unique symbol = Symbol('policyloop.endpointAtRegistration');

/** The raw (not capturing) client of each prompted model, for routing a rollout's requests to it. */
const rawClients = new WeakMap<object, ChatCompletionsClient>();

/** The client and model name a trainer sends a baseline's validation requests to. */
export function baselineRoute(model: PromptedModel): { client: ChatCompletionsClient; model: string } {
  const client = rawClients.get(model);
  if (client === undefined) throw invalidOption('baselines[]', model, 'a PromptedModel');
  return { client, model: model.model };
}

/**
 * A model at an OpenAI-compatible endpoint, scored by rollouts, with its own metric history. As
 * it is, a prompted (not trained) model: a baseline beside a {@link TrainableModel}, with the
 * same `openai()` (captured into trajectories inside rollouts, `logprobs: true` by default) and
 * `log()` (its `val/*` metrics in its own `history.jsonl`), so the same validation rollouts score
 * it; `RLTrainer`'s `validation.baselines` logs it at the start. `TrainableModel` extends it.
 * @example
 * const baseline = new PromptedModel({
 *   project: 'demo', name: 'gpt-4o-mini', model: 'gpt-4o-mini', baseURL: 'https://api.openai.com/v1',
 * });
 * await baseline.log({ groups: await gatherTrajectoryGroups(valScenarios, rollout, { reward }), split: 'val' });
 */
// biome-ignore lint/complexity/noBannedTypes: a prompted model emits no event; subclasses name theirs.
export class PromptedModel<Events extends EventEmitter.ValidEventTypes = {}> extends EventEmitter<Events> {
  /** The handle's name. */
  readonly name: string;
  /** Its project. */
  readonly project: string;
  private readonly prompted: PromptedEndpoint | undefined;

  /** @throws {InvalidArgumentError} for a missing or bad name, project, model, base URL or option. */
  constructor(options: PromptedModelOptions);
  /** For a subclass whose endpoint is known at registration (see {@link ENDPOINT_AT_REGISTRATION}). */
  constructor(options: { name: string; project: string }, endpoint: typeof ENDPOINT_AT_REGISTRATION);
  constructor(options: PromptedModelOptions, endpoint?: typeof ENDPOINT_AT_REGISTRATION) {
    super();
    // A subclass whose endpoint comes at registration checked its own options.
    if (endpoint !== ENDPOINT_AT_REGISTRATION) parseOptions(PromptedModelSchema, options);
    assertPathSegment('project', options.project);
    assertPathSegment('name', options.name);
    this.name = options.name;
    this.project = options.project;
    if (endpoint === ENDPOINT_AT_REGISTRATION) return;
    this.prompted = {
      model: options.model,
      baseURL: options.baseURL,
      apiKey: options.apiKey ?? readEnv(ENV.openAIApiKey) ?? 'none',
      fetch: options.fetch,
      files: modelFiles(path.resolve(options.dataDir ?? DEFAULT_DATA_DIR), options.project, options.name),
      timeout: options.timeout,
      maxRetries: options.maxRetries,
    };
    rawClients.set(this, this.rawClient());
  }

  /** The model name the endpoint knows (a trained model's: its inference name, latest step). */
  get model(): string {
    return this.inferenceName();
  }

  /** Paths of its local files (history; a trained model's also spool and SFT data). */
  get files(): ModelFiles {
    return this.promptedEndpoint().files;
  }

  /**
   * The base URL of the endpoint's OpenAI-compatible chat completions (ends in `/v1`): the
   * `baseURL` of a framework's provider. A trained model's throws before it is registered.
   * @example
   * const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
   */
  get inferenceBaseURL(): string {
    return this.endpoint().baseURL;
  }

  /**
   * The bearer key of the endpoint's chat completions: the `apiKey` of a framework's provider.
   * @example
   * const chat = new ChatOpenAI({ model: model.inferenceName(), apiKey: model.inferenceApiKey, configuration: { baseURL: model.inferenceBaseURL, fetch: model.fetch() } });
   */
  get inferenceApiKey(): string {
    return this.endpoint().apiKey;
  }

  /**
   * The base URL to give `new Anthropic({ baseURL, apiKey, fetch: model.fetch() })`: the
   * inference base URL without its `/v1` (the Anthropic SDK appends `/v1/messages` itself). The
   * recording `fetch` answers those Messages API calls through the endpoint's chat completions.
   * A trained model's throws before it is registered.
   * @throws {PolicyloopError} when the inference base URL does not end in `/v1`.
   * @example
   * const anthropic = new Anthropic({ baseURL: model.anthropicBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
   */
  get anthropicBaseURL(): string {
    return anthropicBaseURL(this.inferenceBaseURL);
  }

  /**
   * The name to call it by in chat completions: a prompted model's is the endpoint's model name
   * (`step` does not apply); a trained model's names its latest step, or `step` pinned.
   * @example
   * baseline.inferenceName(); // 'gpt-4o-mini'
   */
  inferenceName(_step?: number): string {
    return this.promptedEndpoint().model;
  }

  /**
   * An `openai` client for the endpoint: exactly
   * `captureCompletions(new OpenAI({ baseURL, apiKey }), { defaults })`, with `defaults` of
   * `model` (this model's inference name) and `logprobs: true` plus `options.defaults`. Defaults
   * follow {@link captureCompletions}'s one rule: they fill a request key whose value is
   * `undefined` or `null` (`model` also when it is `''`, since the SDK's types require the key);
   * the request's own values win. Inside a rollout (`gatherTrajectoryGroups`) each completion is
   * captured into the rollout's trajectory. `client.responses.create` (the Responses API, streamed
   * or not) works too: it is translated into one chat completion, recorded the same way, and
   * answered in the Responses API's shape (see {@link captureFetch}). A trained model's client also
   * follows an `RLTrainer`'s pins: inside its rollouts a request for the model's latest name goes
   * to the step the rollout is stamped with.
   * @example
   * const client = model.openai();
   * const reply = await client.chat.completions.create({ model: model.inferenceName(), messages });
   * const response = await client.responses.create({ model: model.inferenceName(), input: 'Hi' });
   */
  openai(options: OpenAIClientOptions = {}): OpenAI {
    parseOptions(OpenAIClientSchema, options);
    // The endpoint first: before registration it throws the error that says so.
    const inner =
      this.endpoint().fetch ?? ((...args: Parameters<typeof globalThis.fetch>) => globalThis.fetch(...args));
    const defaults = this.requestDefaults(options);
    // Chat completions go as they always did (the captured client records them); the Responses
    // API is translated on the client's fetch, pinned like `fetch()`'s requests.
    const translating = translatingFetch(inner, this.pinnableFetch(inner), () => defaults);
    return captureCompletions(this.pinnable(this.rawClient(options, translating)), { defaults });
  }

  /**
   * A recording `fetch` for agent frameworks (AI SDK providers, LangChain's `ChatOpenAI`, Mastra,
   * an `openai` client): exactly `captureFetch({ fetch, defaults })` with `defaults` of `model`
   * (this model's inference name) and `logprobs: true` plus `options.defaults`, over the
   * endpoint's own `fetch` when it has one. Inside a rollout every chat completion made through it
   * is recorded into the rollout's trajectory (see {@link captureFetch}); so is every Responses API
   * call (`POST …/responses`) and every Anthropic Messages API call (`POST …/v1/messages`, with
   * {@link anthropicBaseURL}), each translated into one chat completion. A trained model's follows
   * an `RLTrainer`'s pins as `openai()` does.
   * @example
   * const provider = createOpenAI({ baseURL: model.inferenceBaseURL, apiKey: model.inferenceApiKey, fetch: model.fetch() });
   * const { text } = await generateText({ model: provider(model.inferenceName()), prompt: 'hi' });
   */
  fetch(options: ModelFetchOptions = {}): typeof globalThis.fetch {
    parseOptions(ModelFetchSchema, options);
    const defaults = this.requestDefaults(options);
    const inner = this.endpoint().fetch;
    return captureFetch({ fetch: this.pinnableFetch(inner ?? ((...args) => globalThis.fetch(...args))), defaults });
  }

  /**
   * Records the metrics of `params.groups` (prefixed by `split`, with `training_step`) in its
   * `history.jsonl` at `step`; a trained model also sends the groups to the service's log endpoint
   * (see `TrainableModel.log`). `options.signal` stops the waits.
   * @example
   * const row = await baseline.log({ groups: valGroups, split: 'val', step: 0 }, { signal });
   */
  async log(params: LogParams, options: WaitOptions = {}): Promise<HistoryRow> {
    const request = logRequest(options);
    checkWaitOptions(request);
    const { split } = parseOptions(LogParamsSchema, params, { name: 'params' });
    // The schema checked that `groups` is an array; each group is parsed as `train` parses it.
    const parsed = params.groups.map(parseGroup);
    const step = params.step ?? (await this.defaultLogStep(request));
    return this.recordLog(parsed, { split, step, send: params.send ?? true }, request);
  }

  /** The rows of its `history.jsonl`, oldest first. */
  async history(options: WaitOptions = {}): Promise<HistoryRow[]> {
    checkWaitOptions(options);
    return readHistory(this.files.history);
  }

  /** Where it answers chat completions; a subclass registered later supplies its own. */
  protected endpoint(): InferenceEndpoint {
    return this.promptedEndpoint();
  }

  /** Wraps a client so that an `RLTrainer`'s pins apply (a trained model's); as it is otherwise. */
  protected pinnable<T extends ChatCompletionsClient>(client: T): T {
    return client;
  }

  /** Wraps a `fetch` so that an `RLTrainer`'s pins apply (a trained model's); as it is otherwise. */
  protected pinnableFetch(inner: typeof globalThis.fetch): typeof globalThis.fetch {
    return inner;
  }

  /** The step `log` records at when none is given. */
  protected defaultLogStep(_options: WaitOptions): Promise<number> {
    return Promise.resolve(0);
  }

  /** Records checked groups' metrics at `step` (a trained model also sends the groups). */
  protected async recordLog(
    groups: readonly TrajectoryGroup[],
    { split, step }: RecordedLog,
    _options: WaitOptions,
  ): Promise<HistoryRow> {
    return appendHistoryRow(this.files.history, prefixMetrics(computeStepMetrics([...groups]), split), step);
  }

  /** The `openai` client of the endpoint (over `fetch`, else the endpoint's), neither capturing nor pinned. */
  protected rawClient(
    options: Pick<OpenAIClientOptions, 'timeout' | 'maxRetries'> = {},
    fetch: typeof globalThis.fetch | undefined = this.endpoint().fetch,
  ): OpenAI {
    const { baseURL, apiKey } = this.endpoint();
    const timeout = options.timeout ?? this.prompted?.timeout;
    const maxRetries = options.maxRetries ?? this.prompted?.maxRetries;
    return new OpenAI({
      apiKey,
      baseURL,
      fetch: fetch as unknown as OpenAIFetch | undefined,
      timeout,
      maxRetries,
    });
  }

  /** Template variables every request of this model carries (a trained model's `chatTemplateKwargs`). */
  protected chatTemplateDefaults(): Readonly<Record<string, unknown>> | undefined {
    return undefined;
  }

  /**
   * `{ logprobs: true, chat_template_kwargs?, ...defaults }` with `model` filled by the inference
   * name where it has no value.
   */
  private requestDefaults(options: {
    step?: number | undefined;
    defaults?: Readonly<Record<string, unknown>> | undefined;
  }): Record<string, unknown> {
    const templateVariables = this.chatTemplateDefaults();
    const defaults: Record<string, unknown> = {
      logprobs: true,
      ...(templateVariables === undefined ? {} : { chat_template_kwargs: { ...templateVariables } }),
      ...options.defaults,
    };
    const model = defaults['model'];
    if (model === undefined || model === null || model === '') defaults['model'] = this.inferenceName(options.step);
    return defaults;
  }

  private promptedEndpoint(): PromptedEndpoint {
    if (this.prompted === undefined)
      throw new InvalidArgumentError('model', 'Expected a prompted model, got a subclass without its endpoint');
    return this.prompted;
  }
}

/** What `log` records, checked, with defaults. */
export interface RecordedLog {
  readonly split: string;
  readonly step: number;
  readonly send: boolean;
}

/**
 * `log`'s request options, checked against what belongs in its first argument: `split`, `step` or
 * `send` in the options is refused (it would be ignored), naming where it goes.
 */
function logRequest(options: WaitOptions): WaitOptions {
  const given = (options ?? {}) as Record<string, unknown>;
  for (const name of ['split', 'step', 'send'] as const) {
    if (given[name] !== undefined) {
      const where = `in the first argument, log({ groups, ${name} }, { signal }), not in the options`;
      throw invalidOption(`options.${name}`, given[name], where);
    }
  }
  return options;
}

/**
 * The Anthropic SDK's base URL of an OpenAI-compatible base URL: without its trailing `/v1`.
 * @throws {PolicyloopError} when `baseURL` does not end in `/v1`.
 */
export function anthropicBaseURL(baseURL: string): string {
  const trimmed = baseURL.replace(/\/+$/, '');
  if (!trimmed.endsWith('/v1')) {
    throw new PolicyloopError(
      `Expected the inference base URL to end in /v1 (the Anthropic SDK appends /v1/messages to its base URL), got ${baseURL}`,
    );
  }
  return trimmed.slice(0, -'/v1'.length);
}
