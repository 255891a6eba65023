/**
 * The session a Tinker client holds (what the SDK's `InternalClientHolder` keeps for its service,
 * training and sampling clients): the server's flags from `client/config`, the session from
 * `create_session` kept alive by a heartbeat every 10 s, the session's sequence numbers, and the
 * futures of its calls.
 */
import { APIConnectionError } from '../../client/errors.js';
import { TinkerFuture } from './future.js';
import type { FutureRequest, FutureSettings } from './future.js';
import { TINKER_SDK_VERSION, stringOrUndefined } from './http.js';
import type { TinkerHttp } from './http.js';
import type { SubmitOptions } from './types.js';

const HEARTBEAT_MS = 10_000;

/**
 * One session on a Tinker server.
 * @example
 * const session = new TinkerSession(http, 900_000);
 * await session.open();
 * console.log(session.id, session.flags);
 * await session.close();
 */
export class TinkerSession implements FutureSettings {
  private sessionId: string | undefined;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private modelSeq = 0;
  private samplingSeq = 0;
  private readonly closer = new AbortController();
  /** The server's feature flags from `client/config` (after {@link open}). */
  flags: Readonly<Record<string, unknown>> = {};
  /** zstd compression of forward/backward bodies, when the server asks for it and Node has it. */
  zstd: ((bytes: Uint8Array) => Uint8Array) | undefined;
  /** The last heartbeat failure, kept to explain a later failure. */
  lastHeartbeatError: Error | undefined;

  /**
   * @param http The transport.
   * @param futureTimeout Time allowed for one future, from submission to result, in milliseconds.
   */
  constructor(
    readonly http: TinkerHttp,
    readonly futureTimeout: number,
  ) {}

  /** Aborted when the session closes: ends the calls under way. */
  get closing(): AbortSignal {
    return this.closer.signal;
  }

  /** The open session's id. */
  get id(): string {
    if (this.sessionId === undefined) throw new Error('The Tinker session is not open: call open() first.');
    return this.sessionId;
  }

  /** Reads the server's flags and opens a session with a heartbeat. Safe to call once. */
  async open(options: SubmitOptions = {}): Promise<void> {
    if (this.sessionId !== undefined) return;
    const config = await this.http.json('POST', 'client/config', { sdk_version: TINKER_SDK_VERSION }, options);
    this.flags = config !== null && typeof config === 'object' ? (config as Record<string, unknown>) : {};
    if (this.flags['proto_compress_fwdbwd'] === true) await this.useZstd();
    const session = (await this.http.json(
      'POST',
      'create_session',
      { tags: ['policyloop'], user_metadata: {}, sdk_version: TINKER_SDK_VERSION, type: 'create_session' },
      options,
    )) as { session_id?: unknown };
    const id = stringOrUndefined(session.session_id);
    if (id === undefined)
      throw new APIConnectionError({ message: 'Tinker create_session answered without a session_id.' });
    this.sessionId = id;
    this.heartbeat = setInterval(() => this.beat(id), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /** The next `model_seq_id` of `create_model`. */
  nextModelSeq(): number {
    return this.modelSeq++;
  }

  /** The next `sampling_session_seq_id` of `create_sampling_session`. */
  nextSamplingSessionSeq(): number {
    return this.samplingSeq++;
  }

  /** Submits a mutating call and follows its future to the result. */
  call(request: FutureRequest, options: SubmitOptions): Promise<unknown> {
    return new TinkerFuture(this, request, options).result();
  }

  /** Stops the heartbeat and any request under way. The server frees the session when it times out. */
  close(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.closer.abort(new Error('The Tinker client was closed.'));
    this.sessionId = undefined;
  }

  /** One heartbeat; its failure is kept, not thrown. */
  private beat(id: string): void {
    this.http
      .json(
        'POST',
        'session_heartbeat',
        { session_id: id, type: 'session_heartbeat' },
        { signal: this.closer.signal, retries: 0 },
      )
      .then(
        () => {
          this.lastHeartbeatError = undefined;
        },
        (error: unknown) => {
          this.lastHeartbeatError = error instanceof Error ? error : new Error(String(error));
        },
      );
  }

  /** Compresses forward/backward bodies with zstd, or warns that this Node cannot. */
  private async useZstd(): Promise<void> {
    const zlib = (await import('node:zlib')) as { zstdCompressSync?: (bytes: Uint8Array) => Uint8Array };
    const compress = zlib.zstdCompressSync;
    if (typeof compress === 'function') this.zstd = (bytes) => new Uint8Array(compress(bytes));
    else
      process.emitWarning(
        'The Tinker server asks for zstd-compressed forward_backward bodies (proto_compress_fwdbwd), but this Node has no zlib zstd (Node 22.15+ or 24): sending them uncompressed.',
        { code: 'POLICYLOOP_TINKER_NO_ZSTD' },
      );
  }
}
