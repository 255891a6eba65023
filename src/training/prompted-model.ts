/**
 * A model that is not trained: a name at any OpenAI-compatible endpoint (a hosted `gpt-4o-mini`,
 * a local base model), scored by the same rollouts as a trained one, with its own metric history.
 */
import OpenAI from 'openai';
import { InvalidArgumentError } from '../internal/errors.js';
import {
  integerOption,
  invalidOption,
  optional,
  optionsObject,
  stringOption,
  timeoutOption,
  maxRetriesOption,
} from '../internal/options.js';
import { captureCompletions } from '../rollout/capture-completions.js';
import { captureFetch } from '../rollout/capture-fetch.js';
import { computeStepMetrics, prefixMetrics, TrajectoryGroup } from '../schema/index.js';
import type { TrajectoryGroupInput } from '../schema/index.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import { formatIssues } from '../internal/format-issues.js';
import { appendHistoryRow, readHistory } from './history.js';
import type { HistoryRow } from './history.js';
import { assertPathSegment, DEFAULT_DATA_DIR, modelFiles } from './model-files.js';
import type { ModelFiles } from './model-files.js';
import path from 'node:path';

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

/** Options of {@link PromptedModel.log}. */
export interface PromptedLogOptions {
  /**
   * The split; metric names are prefixed with it (`val/reward`).
   * @default 'val'
   */
  split?: string | undefined;
  /**
   * The step the row is recorded at (a prompted model never changes: the trained model's step,
   * to plot them side by side).
   * @default 0
   */
  step?: number | undefined;
}

/** The `fetch` option type of the openai SDK. */
type OpenAIFetch = NonNullable<ConstructorParameters<typeof OpenAI>[0]>['fetch'];

/** The raw (not capturing) client of each prompted model, for routing a rollout's requests to it. */
const rawClients = new WeakMap<PromptedModel, ChatCompletionsClient>();

/** The client and model name a trainer sends a baseline's validation requests to. */
export function baselineRoute(model: PromptedModel): { client: ChatCompletionsClient; model: string } {
  const client = rawClients.get(model);
  if (client === undefined) throw invalidOption('baselines[]', model, 'a PromptedModel');
  return { client, model: model.model };
}

/**
 * A prompted (not trained) model at any OpenAI-compatible endpoint: a baseline beside a
 * {@link TrainableModel}. It has the same `openai()` (captured into trajectories inside rollouts,
 * `logprobs: true` by default) and `log()` (its `val/*` metrics in its own `history.jsonl`), so the
 * same validation rollouts score it; `RLTrainer`'s `validation.baselines` logs it at the start.
 * @example
 * const baseline = new PromptedModel({
 *   project: 'demo', name: 'gpt-4o-mini', model: 'gpt-4o-mini', baseURL: 'https://api.openai.com/v1',
 * });
 * await baseline.log(await gatherTrajectoryGroups(valScenarios, rollout, { reward }), { split: 'val' });
 */
export class PromptedModel {
  /** The handle's name. */
  readonly name: string;
  /** Its project. */
  readonly project: string;
  /** The model name the endpoint knows. */
  readonly model: string;
  /** Paths of its local files (history). */
  readonly files: ModelFiles;
  /** The endpoint's base URL, for a framework's provider (`createOpenAI({ baseURL })`). */
  readonly inferenceBaseURL: string;
  /** The endpoint's key, for a framework's provider. */
  readonly inferenceApiKey: string;
  private readonly client: OpenAI;
  private readonly baseFetch: typeof globalThis.fetch | undefined;

  /** @throws {InvalidArgumentError} for a missing or bad name, project, model, base URL or option. */
  constructor(options: PromptedModelOptions) {
    optionsObject('options', options);
    for (const key of ['name', 'project', 'model', 'baseURL'] as const) stringOption(key, options[key], true);
    optional(options.apiKey, (key) => stringOption('apiKey', key));
    optional(options.dataDir, (dir) => stringOption('dataDir', dir, true));
    optional(options.timeout, (timeout) => timeoutOption('timeout', timeout));
    optional(options.maxRetries, (count) => maxRetriesOption('maxRetries', count));
    assertPathSegment('project', options.project);
    assertPathSegment('name', options.name);
    this.name = options.name;
    this.project = options.project;
    this.model = options.model;
    this.files = modelFiles(path.resolve(options.dataDir ?? DEFAULT_DATA_DIR), options.project, options.name);
    this.inferenceBaseURL = options.baseURL;
    this.inferenceApiKey = options.apiKey ?? process.env['OPENAI_API_KEY'] ?? 'none';
    this.baseFetch = options.fetch;
    this.client = new OpenAI({
      baseURL: options.baseURL,
      apiKey: this.inferenceApiKey,
      ...(options.fetch === undefined ? {} : { fetch: options.fetch as unknown as OpenAIFetch }),
      ...(options.timeout === undefined ? {} : { timeout: options.timeout }),
      ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
    });
    rawClients.set(this, this.client);
  }

  /**
   * The name to call it by in chat completions (the endpoint's model name).
   * @example
   * baseline.inferenceName(); // 'gpt-4o-mini'
   */
  inferenceName(): string {
    return this.model;
  }

  /**
   * An `openai` client for the endpoint, captured into trajectories inside rollouts, with
   * defaults `model` (this model) and `logprobs: true` filled where a request has no value.
   * @example
   * const reply = await baseline.openai().chat.completions.create({ model: '', messages });
   */
  openai(options: { defaults?: Readonly<Record<string, unknown>> | undefined } = {}): OpenAI {
    const defaults: Record<string, unknown> = { model: this.model, logprobs: true, ...options.defaults };
    return captureCompletions(this.client, { defaults });
  }

  /**
   * A recording `fetch` for agent frameworks (see `captureFetch`), with defaults `model` (this
   * model) and `logprobs: true` filled where a request has no value: the same agent code that
   * trains through `TrainableModel.fetch()` runs against this baseline.
   * @example
   * const provider = createOpenAI({ baseURL: baseline.inferenceBaseURL, apiKey: baseline.inferenceApiKey, fetch: baseline.fetch() });
   */
  fetch(options: { defaults?: Readonly<Record<string, unknown>> | undefined } = {}): typeof globalThis.fetch {
    return captureFetch({
      fetch: this.baseFetch,
      defaults: { model: this.model, logprobs: true, ...options.defaults },
    });
  }

  /**
   * Records the metrics of `groups` (prefixed by split) in its `history.jsonl` at `step`.
   * @example
   * const row = await baseline.log(valGroups, { split: 'val', step: 0 });
   */
  async log(groups: readonly TrajectoryGroupInput[], options: PromptedLogOptions = {}): Promise<HistoryRow> {
    optionsObject('options', options);
    const split = options.split ?? 'val';
    if (typeof split !== 'string' || split === '' || split.includes('/')) {
      throw invalidOption('split', split, "a name without '/'");
    }
    const step = optional(options.step, (value) => integerOption('step', value, { min: 0 })) ?? 0;
    if (!Array.isArray(groups)) throw invalidOption('groups', groups, 'an array of trajectory groups');
    const parsed = groups.map((group, index) => {
      const result = TrajectoryGroup.safeParse(group);
      if (!result.success) {
        throw new InvalidArgumentError(
          'groups',
          `Expected trajectory group ${index} to be a TrajectoryGroup: ${formatIssues(result.error.issues)}`,
          { cause: result.error },
        );
      }
      return result.data;
    });
    return appendHistoryRow(this.files.history, prefixMetrics(computeStepMetrics(parsed), split), step);
  }

  /** The rows of its `history.jsonl`, oldest first. */
  async history(): Promise<HistoryRow[]> {
    return readHistory(this.files.history);
  }
}
