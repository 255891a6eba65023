/**
 * Pins a model's "latest" inference name to one step for the code that runs inside
 * {@link runWithPinnedSteps} (an RL trainer's rollouts), and counts the tokens their completions
 * used. A rollout written for `gatherTrajectoryGroups` (calling `model.inferenceName()` or relying
 * on the client's default model) then samples from the step it is stamped with, unchanged.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type {
  ChatCompletionCreateBody,
  ChatCompletionRequestOptions,
  ChatCompletionsClient,
} from '../schema/chat-client.js';

/** What the code inside {@link runWithPinnedSteps} samples from, and where its token usage goes. */
export interface StepPinScope {
  /**
   * Unpinned inference name (`wandb-artifact:///e/p/n`) to where its requests go: a step of the
   * same model, or another client and model (a baseline scored by the same rollouts).
   */
  readonly routes: ReadonlyMap<string, StepRoute>;
  /** Called with each non-streamed completion's `usage.total_tokens`. */
  readonly onTokens?: ((tokens: number) => void) | undefined;
}

/** Where requests for one model name go inside a pin. */
export type StepRoute = { readonly step: number } | { readonly client: ChatCompletionsClient; readonly model: string };

const storage = new AsyncLocalStorage<StepPinScope>();

/** Runs `fn` (and everything it awaits) with `scope`'s pins and token counter in effect. */
export function runWithPinnedSteps<T>(scope: StepPinScope, fn: () => T): T {
  return storage.run(scope, fn);
}

/**
 * Wraps `client` so that a request for a pinned model's latest name goes to its pinned step
 * (`<name>:step<N>`) while a pin is in effect; other requests go as they are. Outside a pin it
 * changes nothing.
 */
export function pinnableClient<T extends ChatCompletionsClient>(client: T): T {
  const completions = client.chat.completions;
  const create = (body: ChatCompletionCreateBody, options?: ChatCompletionRequestOptions): PromiseLike<unknown> => {
    const scope = storage.getStore();
    if (scope === undefined) return completions.create(body, options);
    const route = typeof body.model === 'string' ? scope.routes.get(body.model) : undefined;
    let pending: PromiseLike<unknown>;
    if (route === undefined) pending = completions.create(body, options);
    else if ('step' in route)
      pending = completions.create({ ...body, model: `${body.model}:step${route.step}` }, options);
    else pending = route.client.chat.completions.create({ ...body, model: route.model }, options);
    if (scope.onTokens === undefined || body.stream === true) return pending;
    const onTokens = scope.onTokens;
    const count = (response: unknown): unknown => {
      const tokens = (response as { usage?: { total_tokens?: unknown } } | null)?.usage?.total_tokens;
      if (typeof tokens === 'number' && Number.isFinite(tokens)) onTokens(tokens);
      return response;
    };
    // The openai SDK's APIPromise reads its body once: transform it in its own chain (keeping
    // `.withResponse()` and captureCompletions' recording working), else a plain promise.
    const thenUnwrap = (pending as { _thenUnwrap?: unknown })._thenUnwrap;
    if (typeof thenUnwrap === 'function') {
      return (thenUnwrap as (transform: (data: unknown) => unknown) => PromiseLike<unknown>).call(pending, count);
    }
    return Promise.resolve(pending).then(count);
  };
  const proxy = <O extends object>(target: O, property: PropertyKey, replacement: unknown): O =>
    new Proxy(target, {
      get(object, key) {
        if (key === property) return replacement;
        const value: unknown = Reflect.get(object, key, object);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(object) : value;
      },
    });
  return proxy(client, 'chat', proxy(client.chat, 'completions', proxy(completions, 'create', create)));
}

/**
 * The same for a `fetch` (what `model.fetch()` hands to agent frameworks): inside a pin, a
 * `POST …/chat/completions` whose JSON body names a pinned model's latest name is sent for its
 * pinned step, and a non-streamed answer's `usage.total_tokens` is counted. Routes to another
 * client (a baseline) cannot be taken by a fetch: such requests go as they are. Outside a pin, and
 * for any other request, it changes nothing.
 */
export function pinnableFetch(inner: typeof globalThis.fetch): typeof globalThis.fetch {
  return async (input, init) => {
    const scope = storage.getStore();
    const text = init?.body;
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (scope === undefined || typeof text !== 'string' || !new URL(url).pathname.endsWith('/chat/completions'))
      return inner(input, init);
    let body: { model?: unknown; stream?: unknown };
    try {
      body = JSON.parse(text) as { model?: unknown; stream?: unknown };
    } catch {
      return inner(input, init);
    }
    const route = typeof body.model === 'string' ? scope.routes.get(body.model) : undefined;
    const sent =
      route !== undefined && 'step' in route
        ? { ...init, body: JSON.stringify({ ...body, model: `${body.model as string}:step${route.step}` }) }
        : init;
    const response = await inner(input, sent);
    const onTokens = scope.onTokens;
    if (onTokens !== undefined && body.stream !== true && response.ok) {
      // Read from a copy, without holding the caller's answer back.
      response
        .clone()
        .json()
        .then((answer: { usage?: { total_tokens?: unknown } } | null) => {
          const tokens = answer?.usage?.total_tokens;
          if (typeof tokens === 'number' && Number.isFinite(tokens)) onTokens(tokens);
        })
        .catch(() => undefined);
    }
    return response;
  };
}
