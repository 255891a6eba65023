/**
 * One mutating Tinker call and its future (what the SDK's `_APIFuture` does): the request is
 * submitted, answered by a `request_id`, and `retrieve_future` is long-polled until the result
 * comes. `try_again`, 408 and 5xx poll again; 429 backs off; 410 re-submits the request. A failed
 * future throws {@link TinkerRequestFailedError}, one that outlives the future timeout throws
 * {@link TinkerFutureTimeoutError}.
 */
import { randomUUID } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { APIConnectionTimeoutError, APIError } from '../../client/errors.js';
import { retryDelay } from '../../client/retry-delay.js';
import { delay } from '../../internal/delay.js';
import { userAbortError } from '../../internal/errors.js';
import { ForwardBackwardOutputSchema, SampleResponseSchema } from './proto/tinker_public_pb.js';
import { TinkerFutureTimeoutError, TinkerRequestFailedError } from './errors.js';
import { PROTO, readBody, stringOrUndefined } from './http.js';
import type { Body, TinkerHttp } from './http.js';
import type { SubmitOptions } from './types.js';

/** How long one `retrieve_future` long-poll may take (the SDK's 45 s, plus room for the answer). */
const POLL_TIMEOUT_MS = 60_000;

/** What the futures of one client share. */
export interface FutureSettings {
  readonly http: TinkerHttp;
  /** Time allowed for one future, from submission to result, in milliseconds. */
  readonly futureTimeout: number;
  /** Aborted when the client closes. */
  readonly closing: AbortSignal;
}

/** One mutating call. */
export interface FutureRequest {
  /** The Tinker operation, e.g. `optim_step` (`forward` goes to the `forward_backward` route). */
  readonly operation: string;
  /** Sent as `X-Tinker-Request-Type` when polling, e.g. `OptimStep`. */
  readonly requestType: string;
  /** The body, built again for a re-submission. */
  readonly build: () => Body & { compressed?: boolean };
  /** Submitted to `asample` (sampling), not to the operation's route. */
  readonly asample?: boolean | undefined;
  /** Submitted only after this settles (a model's previous training call was accepted). */
  readonly after?: Promise<unknown> | undefined;
  /** Called once the request was submitted, or failed to be. */
  readonly onSubmitted?: (() => void) | undefined;
}

/** What one poll of `retrieve_future` says to do next. */
type PollOutcome =
  | { readonly kind: 'result'; readonly value: unknown }
  /** `try_again`: yield, then poll again. */
  | { readonly kind: 'pending' }
  /** The long poll outlived its own timeout (SkyRL holds one up to 300 s): poll again at once. */
  | { readonly kind: 'repoll' }
  /** No answer, 408, 5xx or 429: back off (408: not at all), then poll again. */
  | { readonly kind: 'busy'; readonly headers: Headers | undefined; readonly immediate: boolean }
  /** 410: the promise expired or broke on the server: submit the request again. */
  | { readonly kind: 'expired' };

/**
 * A submitted call followed to its result.
 * @example
 * const result = await new TinkerFuture(settings, { operation: 'optim_step', requestType: 'OptimStep', build }, {}).result();
 */
export class TinkerFuture {
  private readonly deadline: AbortSignal;
  /** The deadline, the client's closing and the caller's signal. */
  private readonly signal: AbortSignal;
  /** Sample and forward/backward results come as protobuf. */
  private readonly proto: boolean;
  private readonly idempotencyKey = randomUUID();

  /**
   * @param settings The client's transport and limits.
   * @param request The call.
   * @param options The caller's signal.
   */
  constructor(
    private readonly settings: FutureSettings,
    private readonly request: FutureRequest,
    private readonly options: SubmitOptions,
  ) {
    this.deadline = AbortSignal.timeout(settings.futureTimeout);
    this.signal = AbortSignal.any([this.deadline, settings.closing, ...(options.signal ? [options.signal] : [])]);
    const type = request.requestType;
    this.proto = type === 'Sample' || type === 'ForwardBackward' || type === 'Forward';
  }

  /** Submits the call and follows its future; resolves with the result (a protobuf message or JSON). */
  async result(): Promise<unknown> {
    let requestId = '?';
    try {
      if (this.request.after) await this.request.after;
      requestId = await this.submit();
    } catch (error) {
      this.request.onSubmitted?.();
      return this.fail(error, requestId);
    }
    this.request.onSubmitted?.();
    let retries = 0;
    for (let iteration = 0; ; iteration += 1) {
      const outcome = await this.poll(requestId, iteration);
      if (outcome.kind === 'result') return outcome.value;
      if (outcome.kind === 'pending') {
        retries = 0;
        // A server that answers at once instead of long-polling (or a fetch that never touches the
        // network) would otherwise keep this loop on microtasks forever, starving the timers of
        // futureTimeout and of the caller's abort: yield to the event loop before polling again.
        await this.pause(0, requestId);
      } else if (outcome.kind === 'busy') {
        retries += 1;
        await this.pause(
          outcome.immediate ? 0 : retryDelay(retries, outcome.headers, this.settings.http.firstRetryDelay),
          requestId,
        );
      } else if (outcome.kind === 'expired') {
        // Send the same request again (after yielding, as for try_again, so that a server
        // answering 410 at once cannot starve the timers).
        try {
          await delay(0, this.signal);
          requestId = await this.submit();
        } catch (error) {
          return this.fail(error, requestId);
        }
      }
    }
  }

  /** Sends the request; resolves with its future's id. */
  private async submit(): Promise<string> {
    const { operation } = this.request;
    const route = this.request.asample ? 'asample' : operation === 'forward' ? 'forward_backward' : operation;
    const body = this.request.build();
    const answer = (await this.settings.http.json('POST', route, 'json' in body ? body.json : body.protobuf, {
      signal: this.signal,
      idempotencyKey: this.idempotencyKey,
      protobuf: 'protobuf' in body,
      compressed: body.compressed === true,
    })) as { request_id?: unknown; future_id?: unknown };
    const id = stringOrUndefined(answer.request_id) ?? stringOrUndefined(answer.future_id);
    if (id === undefined)
      throw new Error(`Tinker ${operation} answered without a request_id: ${JSON.stringify(answer)}`);
    return id;
  }

  /** One `retrieve_future` long poll, read as what to do next; throws a failed future's error. */
  private async poll(requestId: string, iteration: number): Promise<PollOutcome> {
    let response: Response;
    try {
      response = await this.settings.http.send(
        'POST',
        'retrieve_future',
        { json: { request_id: requestId, allow_metadata_only: false } },
        {
          signal: this.signal,
          timeout: POLL_TIMEOUT_MS,
          accept: this.proto ? PROTO : 'application/json',
          headers: {
            'X-Tinker-Request-Type': this.request.requestType,
            'X-Tinker-Request-Iteration': String(iteration),
          },
          raw: true,
        },
      );
    } catch (error) {
      if (this.signal.aborted) return this.fail(error, requestId);
      if (error instanceof APIConnectionTimeoutError) return { kind: 'repoll' };
      // No answer (connection refused, reset): back off and poll again.
      return { kind: 'busy', headers: undefined, immediate: false };
    }
    const status = response.status;
    if (status === 200) return this.readResult(response, requestId);
    const body = await readBody(response);
    if (status === 408 || status >= 500 || status === 429)
      return { kind: 'busy', headers: response.headers, immediate: status === 408 };
    if (status === 410) return { kind: 'expired' };
    const { operation } = this.request;
    if (
      status === 400 &&
      body !== null &&
      typeof body === 'object' &&
      typeof (body as { detail?: unknown }).detail === 'string'
    )
      throw new TinkerRequestFailedError(operation, requestId, (body as { detail: string }).detail, undefined, status);
    throw APIError.generate(status, body, `Tinker retrieve_future for ${operation} failed`, response.headers);
  }

  /** A 200 of `retrieve_future`: the result (protobuf or JSON), `try_again`, or the future's failure. */
  private async readResult(response: Response, requestId: string): Promise<PollOutcome> {
    const { operation } = this.request;
    const type = response.headers.get('content-type') ?? '';
    if (type.includes(PROTO)) {
      const bytes = new Uint8Array(await response.arrayBuffer());
      return {
        kind: 'result',
        value:
          this.request.requestType === 'Sample'
            ? fromBinary(SampleResponseSchema, bytes)
            : fromBinary(ForwardBackwardOutputSchema, bytes),
      };
    }
    const result = (await response.json()) as Record<string, unknown>;
    if (result['type'] === 'try_again' || result['status'] === 'complete_metadata') return { kind: 'pending' };
    if ('error' in result && typeof result['error'] === 'string')
      throw new TinkerRequestFailedError(operation, requestId, result['error'], stringOrUndefined(result['category']));
    if (this.proto)
      throw new Error(
        `Tinker ${operation}: expected a protobuf result, got JSON ${JSON.stringify(result).slice(0, 200)}`,
      );
    return { kind: 'result', value: result };
  }

  /** Waits `ms` before polling again; an abort there fails the call. */
  private async pause(ms: number, requestId: string): Promise<void> {
    try {
      await delay(ms, this.signal);
    } catch (abort) {
      this.fail(abort, requestId);
    }
  }

  /** Throws the error a call ends with: the caller's abort, the future timeout, or `error` itself. */
  private fail(error: unknown, requestId: string): never {
    const { operation } = this.request;
    if (this.options.signal?.aborted) throw userAbortError(this.options.signal, `Tinker ${operation}`);
    if (this.deadline.aborted) throw new TinkerFutureTimeoutError(operation, requestId, this.settings.futureTimeout);
    throw error;
  }
}
