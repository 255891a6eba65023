/**
 * An {@link Engine} whose weights live on a Tinker server. The local service keeps models,
 * checkpoints, jobs, events and history as for its own engine; this engine renders and tokenizes
 * every request on this machine (the model's own tokenizer and chat template, from the Hugging
 * Face cache or the model folder), samples it on the server, parses the reply (tool calls, Qwen3's
 * `<think>`), and trains by sending token ids and per-token loss inputs.
 *
 * A checkpoint of the service is a small `tinker.json` in its directory (`checkpoint-record.ts`):
 * the server's training model, the sampler weights (`save_weights_for_sampler`) that serve its
 * completions, and the resumable state (`save_weights`) a new training model loads when the old
 * one is gone. As the Tinker API splits sampling from training, so does this engine: its sampling
 * sessions (`sampling-sessions.ts`) and its training jobs (`training-jobs.ts`).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { ChatCompletionRequestBody, ChatCompletionResult, Choice } from '../../schema/index.js';
import { completionUsage, EngineInputError, EngineUnavailableError } from '../../engine/types.js';
import type {
  Engine,
  EngineTrainingEvent,
  EngineTrainingJob,
  EngineTrainingResult,
  PolicyRef,
} from '../../engine/types.js';
import { buildHfChoice } from '../../text/choice.js';
import type { SampledText } from '../../text/choice.js';
import { textFolderOf } from '../../text/hub-cache.js';
import { loadDefaultTextLayer } from '../../text/loader.js';
import type { TextLayer, TextLayerLoader } from '../../text/loader.js';
import { promptTokens } from '../../text/prompt.js';
import { APIError } from '../../client/errors.js';
import { CheckpointRecords, readTinkerCheckpoint } from './checkpoint-record.js';
import { TinkerRequestFailedError } from './errors.js';
import { SamplingSessions } from './sampling-sessions.js';
import type { TinkerClient } from './tinker-client.js';
import { TinkerTrainingJobs } from './training-jobs.js';
import type { LoraSettings, TinkerSequence } from './types.js';

/** Tinker's `LossFnType` without `cross_entropy`: what an RL job may name (SkyRL 0.4.0 refuses `dro` itself). */
const TINKER_RL_LOSSES = ['importance_sampling', 'ppo', 'cispo', 'dro'] as const;

/** Completion tokens when a request names no `max_tokens` (and the context leaves room). */
const DEFAULT_MAX_TOKENS = 4096;

/** Options of {@link TinkerEngine}. */
export interface TinkerEngineOptions {
  /** An open client (its session is this engine's). */
  readonly client: TinkerClient;
  /** The server's base URL, recorded in checkpoints. */
  readonly server: string;
  /** The base models the server trains. */
  readonly baseModels: readonly string[];
  /** LoRA settings of the training models this engine creates. */
  readonly lora: LoraSettings;
  /** Save each step's resumable state (`save_weights`) besides its sampler weights. @default true */
  readonly resumableState?: boolean | undefined;
  /** Environment for the Hugging Face cache. @default process.env */
  readonly env?: NodeJS.ProcessEnv | undefined;
  /** Loads a folder's text layer. @default the text layer of `src/text/` */
  readonly textLayer?: TextLayerLoader | undefined;
}

/** The Tinker server as the local service's engine. */
export class TinkerEngine implements Engine {
  private readonly texts = new Map<string, Promise<{ text: TextLayer; contextLength: number }>>();
  private readonly records = new CheckpointRecords();
  private readonly sessions: SamplingSessions;
  private readonly jobs: TinkerTrainingJobs;
  private readonly loadText: TextLayerLoader;
  private closed = false;

  /** @param options The open client, the server's address, its base models and the LoRA settings. */
  constructor(private readonly options: TinkerEngineOptions) {
    this.loadText = options.textLayer ?? loadDefaultTextLayer;
    this.sessions = new SamplingSessions(options.client, this.records);
    this.jobs = new TinkerTrainingJobs({
      client: options.client,
      server: options.server,
      lora: options.lora,
      resumableState: options.resumableState,
      records: this.records,
      referenceLogprobs: (policy, tokens, call) => this.sessions.computeLogprobs(policy, tokens, call),
    });
  }

  /** The base models the server trains. */
  baseModels(): readonly string[] {
    return this.options.baseModels;
  }

  /** The RL losses of the Tinker API (`forward_backward`'s `loss_fn` but SFT's `cross_entropy`). */
  lossFns(): readonly string[] {
    return TINKER_RL_LOSSES;
  }

  /** Why `id` cannot be registered: the server does not train it. */
  describeMissingBaseModel(id: string): string {
    return `The Tinker server at ${this.options.server} trains ${this.options.baseModels.map((model) => JSON.stringify(model)).join(', ') || 'no base model'}, not ${JSON.stringify(id)} (its get_server_capabilities)`;
  }

  /** The text layer and context length of a base model, loaded once. */
  private textOf(baseModel: string): Promise<{ text: TextLayer; contextLength: number }> {
    let loading = this.texts.get(baseModel);
    if (!loading) {
      loading = (async () => {
        const folder = textFolderOf(baseModel, this.options.env ?? process.env);
        const text = await this.loadText(folder);
        let contextLength = 32_768;
        try {
          const config = JSON.parse(await readFile(path.join(folder, 'config.json'), 'utf8')) as Record<
            string,
            unknown
          >;
          const length = config['max_position_embeddings'];
          if (typeof length === 'number' && Number.isInteger(length) && length > 0) contextLength = length;
        } catch {
          // No config.json beside the tokenizer: keep the default context.
        }
        return { text, contextLength };
      })();
      loading.catch(() => this.texts.delete(baseModel));
      this.texts.set(baseModel, loading);
    }
    return loading;
  }

  /** Renders the request, samples it on the server and parses the replies. */
  async chatCompletion(
    policy: PolicyRef,
    request: ChatCompletionRequestBody,
    options: { readonly signal?: AbortSignal | undefined } = {},
  ): Promise<ChatCompletionResult> {
    if (this.closed) throw new Error('The Tinker engine is closed.');
    const { text, contextLength } = await this.textOf(policy.baseModel);
    for (const message of request.messages) {
      const content = (message as { content?: unknown }).content;
      if (
        Array.isArray(content) &&
        content.some((part) => !['text', 'refusal'].includes((part as { type?: string }).type ?? ''))
      )
        throw new EngineInputError(
          'Tinker models are served text only here: image, audio and file parts are not supported.',
          ['body', 'messages'],
        );
    }
    const prompt = promptTokens(text, request.messages, request.tools, request.chat_template_kwargs);
    if (prompt.length >= contextLength)
      throw new EngineInputError(
        `The prompt is ${prompt.length} tokens long, but ${policy.baseModel} has a context of ${contextLength} tokens: shorten the messages or tools.`,
        ['body', 'messages'],
      );
    const room = contextLength - prompt.length;
    const maxTokens = Math.min(room, request.max_completion_tokens ?? request.max_tokens ?? DEFAULT_MAX_TOKENS);
    const stops =
      request.stop === null || request.stop === undefined
        ? []
        : typeof request.stop === 'string'
          ? [request.stop]
          : request.stop;
    const params = {
      promptTokens: prompt,
      numSamples: request.n ?? 1,
      maxTokens,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
      seed: request.seed ?? undefined,
      stopTokens: text.stopTokenIds,
    };
    let result;
    try {
      result = await this.sessions.sample(policy, params, options);
    } catch (error) {
      if (options.signal?.aborted) throw error;
      const refusal = refusalOf(error);
      // The server refused what was asked (a 4xx, Tinker's category `user`): the caller's to fix, a 4xx here too.
      if (refusal !== undefined)
        throw new EngineInputError(
          `The Tinker server at ${this.options.server} refused the request (HTTP ${refusal.status}): ${refusal.reason}`,
          ['body'],
          refusal.status,
        );
      throw new EngineUnavailableError(
        `The Tinker server at ${this.options.server} could not sample: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
    const tools = request.tools ?? [];
    const shape = {
      logprobs: request.logprobs === true,
      tokensAsIds: request.return_tokens_as_token_ids === true,
      parseTools: tools.length > 0 && request.tool_choice !== 'none',
      makeId: () => `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
      text,
      tools,
    };
    let completionTokens = 0;
    const choices: Choice[] = result.sequences.map((sequence, index) => {
      const sampled = sampledText(sequence, text, stops);
      completionTokens += sequence.tokens.length;
      return {
        ...buildHfChoice(sampled, index, shape),
        // Token in, token out: training uses these ids and never tokenizes the sampled text again.
        prompt_token_ids: prompt,
        token_ids: [...sampled.tokens],
      } as Choice;
    });
    return {
      choices,
      usage: completionUsage(prompt.length, completionTokens),
    };
  }

  /** Runs an RL or SFT job on the server and writes the checkpoint record. */
  async train(
    job: EngineTrainingJob,
    options: { readonly onEvent: (event: EngineTrainingEvent) => void; readonly signal?: AbortSignal | undefined },
  ): Promise<EngineTrainingResult> {
    if (this.closed) throw new Error('The Tinker engine is closed.');
    const { text } = await this.textOf(job.policy.baseModel);
    return this.jobs.run(job, text, options);
  }

  /** Deletes a checkpoint's sampler weights and saved state on the server (404s count as deleted). */
  async deleteCheckpoint(checkpointPath: string): Promise<void> {
    const record = await readTinkerCheckpoint(checkpointPath);
    this.records.delete(checkpointPath);
    const sampler = record.samplerPath.replace(
      /^tinker:\/\/([^/]+)\/(?!sampler_weights\/)/,
      'tinker://$1/sampler_weights/',
    );
    this.sessions.forget(record.samplerPath);
    await Promise.all([
      this.options.client.deleteCheckpoint(sampler),
      record.statePath === null ? false : this.options.client.deleteCheckpoint(record.statePath),
    ]);
  }

  /**
   * Unloads the training models this engine created, freeing the server's adapter slots (their
   * saved state stays: a later run resumes from it, and sampling an old checkpoint saves its
   * sampler weights again from it), and forgets the sampling sessions; the client is closed by
   * its owner.
   */
  async close(): Promise<void> {
    this.closed = true;
    const reloaded = await this.sessions.close();
    const ids = [...this.jobs.close(), ...reloaded];
    const client = this.options.client;
    await Promise.all(
      ids.map((id) => client.unloadModel(id, { signal: AbortSignal.timeout(30_000) }).catch(() => undefined)),
    );
  }
}

/**
 * A sampled sequence as the text layer shapes choices: the end-of-turn token is kept in the
 * tokens (a trainer learns to stop) and left out of the text; a stop string of the request ends
 * the text and drops the tokens from the one that reached it.
 */
function sampledText(sequence: TinkerSequence, text: TextLayer, stops: readonly string[]): SampledText {
  const stopIds = new Set(text.stopTokenIds);
  let tokens = sequence.tokens;
  let logprobs = sequence.logprobs.length === tokens.length ? sequence.logprobs : tokens.map(() => Number.NaN);
  const last = tokens[tokens.length - 1];
  const endsOnStopToken = last !== undefined && stopIds.has(last);
  const body = endsOnStopToken ? tokens.slice(0, -1) : tokens;
  let decoded = text.decode(body, { skipSpecialTokens: true });
  let finishReason: 'stop' | 'length' = endsOnStopToken || sequence.stopReason === 'stop' ? 'stop' : 'length';
  const hits = stops.map((stop) => decoded.indexOf(stop)).filter((index) => index >= 0);
  if (hits.length > 0) {
    const cut = Math.min(...hits);
    let keep = 0;
    while (keep < body.length && text.decode(body.slice(0, keep + 1), { skipSpecialTokens: true }).length <= cut)
      keep += 1;
    tokens = body.slice(0, keep);
    logprobs = logprobs.slice(0, keep);
    decoded = decoded.slice(0, cut);
    finishReason = 'stop';
  }
  return { tokens, logprobs, alternatives: tokens.map(() => []), text: decoded, finishReason };
}

/**
 * The status and reason of a Tinker server's refusal of a request for its content: a failed
 * future the server blames on the request (SkyRL's 400, Tinker's category `user`; answered 400),
 * or a 4xx to the request itself (not 401/403, the server's key; not 408/429, which are retried).
 * Undefined for anything else (the server's fault, no answer): that stays a 503.
 */
function refusalOf(error: unknown): { status: number; reason: string } | undefined {
  if (error instanceof TinkerRequestFailedError && error.refusedRequest)
    return { status: error.status ?? 400, reason: error.serverMessage };
  if (error instanceof APIError && error.status !== undefined) {
    const status = error.status;
    if (status >= 400 && status < 500 && ![401, 403, 408, 429].includes(status))
      return { status, reason: error.message };
  }
  return undefined;
}
