/**
 * `context.endpoint`: an OpenAI- and Anthropic-compatible endpoint of one rollout, for agents that
 * run in another process (a CLI, a Python or Go program, an agent server). It is served on
 * 127.0.0.1 by the training script's own process (see `endpoint-server.ts`), forwards each call
 * to the gather's model through the model's recording `fetch`, in the rollout's async context, and
 * so records it into that rollout's trajectory exactly as an in-process captured client would
 * (with the pins of an `RLTrainer`). Responses and Messages calls are translated on the way, as
 * they are in-process.
 */
import { AsyncResource } from 'node:async_hooks';
import { PolicyloopError } from '../../internal/errors.js';
import {
  type AgentProcessOptions,
  type AgentProcessOutput,
  type AgentProcessResult,
  spawnAgentProcess,
} from './agent-process.js';
import { type EndpointCall, EndpointServer } from './endpoint-server.js';

/**
 * What `context.endpoint` gives a rollout: base URLs and a key for an agent in another process,
 * and `spawn()` to run one with them.
 * @example
 * const { result } = await context.endpoint.spawn<{ reward: number }>('python', ['agent.py', task]);
 * return { reward: result?.reward ?? 0 };
 */
export interface RolloutEndpoint {
  /** `http://127.0.0.1:<port>/rollouts/<id>/v1`: the `baseURL` of an `openai` client (chat completions, Responses). */
  readonly openaiBaseURL: string;
  /** `http://127.0.0.1:<port>/rollouts/<id>`: the `baseURL` of an Anthropic client (it appends `/v1/messages`). */
  readonly anthropicBaseURL: string;
  /** The endpoint's key: random per process, never the training key. */
  readonly apiKey: string;
  /** `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`, for a child's environment. */
  readonly env: Readonly<{
    OPENAI_BASE_URL: string;
    OPENAI_API_KEY: string;
    ANTHROPIC_BASE_URL: string;
    ANTHROPIC_API_KEY: string;
  }>;
  /**
   * Runs an agent process for this rollout and waits for it: `command args` with `process.env`, this
   * endpoint's `env` and `options.env` (in that order of precedence, last wins) as its environment,
   * `options.input` on its stdin. The child leads a process group of its own: when the rollout is
   * aborted, times out or ends, the group (the child and whatever it started) gets SIGTERM, then
   * SIGKILL after `options.killGrace`, and the call rejects with the rollout's abort reason; what the
   * child leaves running when it exits is ended the same way. Resolves once the child exited with
   * code 0, with its output and `result`: the last line of its stdout that is a JSON object (print
   * `{"reward": 0.8}` last to hand a reward back). Any other exit rejects with
   * {@link AgentProcessError} (command, code or signal, stderr's tail), which fails the rollout.
   * @example
   * rollout: async (task, context) => {
   *   const { result } = await context.endpoint.spawn<{ reward: number }>('python', ['agent.py', task], {
   *     env: { WANDB_API_KEY: undefined }, // keep the training key from the child
   *   });
   *   return { reward: result?.reward ?? 0 };
   * }
   */
  spawn<R = AgentProcessOutput>(
    command: string,
    args?: readonly string[],
    options?: AgentProcessOptions,
  ): Promise<AgentProcessResult<R>>;
}

/**
 * The model a rollout endpoint forwards to: a `PromptedModel` or `TrainableModel` (anything with
 * its inference endpoint and a recording `fetch`).
 */
export interface EndpointModel {
  /** Base URL of its OpenAI-compatible chat completions (ends in `/v1`). */
  readonly inferenceBaseURL: string;
  /** Its bearer key (sent by the endpoint, never shown to the child). */
  readonly inferenceApiKey: string;
  /** The name to call it by (a trained model's latest; an `RLTrainer` pins it per rollout). */
  inferenceName(): string;
  /** A recording `fetch` over its endpoint (`model.fetch()`). */
  fetch(): typeof globalThis.fetch;
}

/** What a rollout tells the endpoint about itself. */
export interface EndpointRollout {
  readonly groupIndex: number;
  readonly index: number;
  readonly attempt: number;
  /** Aborts when the rollout is cancelled or times out: so do its forwarded calls. */
  readonly signal: AbortSignal;
}

/** One gather's use of the process's endpoint server: a route per rollout that asks for one. */
export class GatherEndpoint {
  readonly #server: EndpointServer;
  readonly #model: EndpointModel;
  readonly #fetch: typeof globalThis.fetch;
  readonly #baseURL: string;

  private constructor(server: EndpointServer, model: EndpointModel) {
    this.#server = server;
    this.#model = model;
    this.#fetch = model.fetch();
    this.#baseURL = model.inferenceBaseURL.replace(/\/+$/, '');
  }

  /** Starts (or joins) the process's listener for a gather whose rollouts forward to `model`. */
  static async open(model: EndpointModel): Promise<GatherEndpoint> {
    const server = await EndpointServer.acquire();
    try {
      return new GatherEndpoint(server, model);
    } catch (error) {
      await server.release();
      throw error;
    }
  }

  /**
   * The endpoint of one rollout, answered in the async context this is called from (the
   * rollout's), and the function that ends it (its calls then get 410).
   */
  openRollout(rollout: EndpointRollout): { endpoint: RolloutEndpoint; end: () => void } {
    const resource = new AsyncResource('policyloop.RolloutEndpoint');
    const name = `rollout ${rollout.index} of group ${rollout.groupIndex} (attempt ${rollout.attempt})`;
    const id = this.#server.register({
      name,
      signal: rollout.signal,
      answer: (call) => resource.runInAsyncScope(() => this.#forward(call)),
    });
    const openaiBaseURL = `${this.#server.origin}/rollouts/${id}/v1`;
    const anthropicBaseURL = `${this.#server.origin}/rollouts/${id}`;
    const apiKey = this.#server.key;
    const env = {
      OPENAI_BASE_URL: openaiBaseURL,
      OPENAI_API_KEY: apiKey,
      ANTHROPIC_BASE_URL: anthropicBaseURL,
      ANTHROPIC_API_KEY: apiKey,
    };
    // Aborts when the rollout ends however it ends: an agent process still running then is killed.
    const ended = new AbortController();
    let processSignal: AbortSignal | undefined;
    const endpoint: RolloutEndpoint = {
      openaiBaseURL,
      anthropicBaseURL,
      apiKey,
      env,
      spawn: <R = AgentProcessOutput>(command: string, args: readonly string[] = [], options = {}) => {
        processSignal ??= AbortSignal.any([rollout.signal, ended.signal]);
        try {
          return spawnAgentProcess<R>(command, args, options, env, processSignal);
        } catch (error) {
          // A bad argument rejects as any failure of the call does (`await` or `.catch` both see it).
          return Promise.reject(error);
        }
      },
    };
    const end = (): void => {
      this.#server.end(id);
      ended.abort(new PolicyloopError(`${name} ended while its agent process was still running`));
    };
    return { endpoint, end };
  }

  /** The gather ended: lets the listener close once no gather uses it. */
  close(): Promise<void> {
    return this.#server.release();
  }

  /**
   * Forwards a call to the model through its recording `fetch` (`call.signal` aborts when the caller
   * hangs up or the rollout is cancelled or times out). The call is the rollout's: any
   * model name it asks for that is not this model's (a child written for `gpt-4o` or Claude) is
   * replaced by this model's inference name; `<name>:step<N>` stays.
   */
  async #forward(call: EndpointCall): Promise<Response> {
    const name = this.#model.inferenceName();
    if (call.api === 'models') {
      const model = { id: name, object: 'model', created: 0, owned_by: 'policyloop', root: name };
      // Both SDKs' list shapes: OpenAI's `{object, data}`, Anthropic's `{data, has_more, first_id, last_id}`.
      const anthropic = { type: 'model', display_name: name, created_at: '1970-01-01T00:00:00Z' };
      return Promise.resolve(
        Response.json({
          object: 'list',
          data: [{ ...model, ...anthropic }],
          has_more: false,
          first_id: name,
          last_id: name,
        }),
      );
    }
    const body = call.body as Record<string, unknown>;
    const asked = body['model'];
    if (typeof asked !== 'string' || (asked !== name && !asked.startsWith(`${name}:step`))) body['model'] = name;
    const path = call.api === 'chat' ? 'chat/completions' : call.api === 'responses' ? 'responses' : 'messages';
    return this.#fetch(`${this.#baseURL}/${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: body['stream'] === true ? 'text/event-stream' : 'application/json',
        authorization: `Bearer ${this.#model.inferenceApiKey}`,
      },
      body: JSON.stringify(body),
      signal: call.signal,
    });
  }
}
