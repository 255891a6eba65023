/**
 * Options more than one backend takes, declared once (their docs and their checks): the training
 * client's settings of the service backends, and the port of an in-process service.
 */
import type { ClientOptions } from '../client/options.js';
import { clientRetryShape } from '../client/training-client.js';
import { option } from '../internal/option-schema.js';

/**
 * What {@link LocalBackend} and {@link HostedBackend} pass to the training client they make (the
 * options of `clientRetryShape`, with `ClientOptions`' docs), and the `fetch` of that client and of
 * the models' OpenAI clients.
 */
export interface ServiceClientOptions extends Pick<ClientOptions, keyof typeof clientRetryShape> {
  /**
   * `fetch` for the training client and for the models' OpenAI clients (`model.openai()`,
   * `model.fetch()`): proxies, custom agents, tests that inject failures.
   * @default globalThis.fetch
   */
  fetch?: typeof globalThis.fetch | undefined;
}

/** The checks of {@link ServiceClientOptions}, the client's own defaults included. */
export const serviceClientShape = {
  ...clientRetryShape,
  fetch: option.function<typeof globalThis.fetch>().optional(),
};

/** Options of a backend that runs the local service in this process ({@link LocalBackend}, {@link TinkerBackend}). */
export interface InProcessServiceOptions {
  /**
   * Port of the in-process service (on loopback); 0 picks a free one.
   * @default 0
   */
  port?: number | undefined;
}

/** The checks of {@link InProcessServiceOptions}, with the default. */
export const inProcessServiceShape = {
  port: option.integer({ min: 0, max: 65_535 }).default(0),
};
