/** Options of the local service and their documented defaults, resolved in one place. */
import { z } from 'zod';
import type { Engine } from '../engine/types.js';
import { escapeControl } from '../internal/control-characters.js';
import { MAX_TIMER_MS } from '../internal/delay.js';
import { DEFAULT_DATA_DIR } from '../internal/env.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { resolveTrainingDataAccess, type TrainingDataAccess } from './training-data-access.js';

/**
 * The documented development API key, used when no key is configured. Anyone can read it in the
 * docs: configure your own keys (`apiKeys`, `--api-key`) before exposing the service beyond loopback.
 */
export const DEV_API_KEY = 'policyloop-local-dev-key';

/** Where the service writes its notes. The service never writes to the console on its own. */
export interface ServerLogger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Options of {@link createApp} (and of `serve`). */
export interface ServerOptions {
  /** Directory of the SQLite store and the weight files. @default '.policyloop' */
  dataDir?: string | undefined;
  /** Accepted Bearer keys. @default [DEV_API_KEY] */
  apiKeys?: readonly string[] | undefined;
  /**
   * The policy engine. @default the local engine (`createEngine()` of `policyloop`'s engine),
   * loaded on first use and closed with the service; an engine passed in is not closed.
   */
  engine?: Engine | undefined;
  /**
   * Hugging Face model folders the default engine serves besides those of the Hugging Face cache
   * (`serve --model DIR`; see docs/engine.md, "Real models"). Ignored when `engine` is given.
   * @default []
   */
  models?: readonly string[] | undefined;
  /** Largest accepted request body in bytes; larger ones are answered 413. @default 64 MiB */
  maxBodyBytes?: number | undefined;
  /** How many jobs of different models may train at once (one model's jobs never overlap). @default 1 */
  maxConcurrentJobs?: number | undefined;
  /**
   * Longest a chat completion may take, queueing included; a slower one is abandoned and
   * answered 503 (with `Retry-After`), so that no request hangs when the engine is stuck or
   * overloaded. @default 300_000 (5 minutes)
   */
  requestTimeoutMs?: number | undefined;
  /**
   * Longest a training job may run (from RUNNING); a slower one is stopped and fails with a
   * `training_failed` event, so that a stuck job cannot block its model's queue forever.
   * @default 21_600_000 (6 hours)
   */
  jobTimeoutMs?: number | undefined;
  /**
   * Largest SFT training data file (`training_data_url`) read, in bytes; a bigger one fails the
   * job with a message saying so. @default 256 MiB
   */
  maxTrainingDataBytes?: number | undefined;
  /**
   * Largest page of logged trajectory groups (or of step metrics) one list request returns, in
   * bytes of stored JSON: a page stops before the group (or step and split) that would pass it
   * (it always holds at least one) and `has_more` continues from there, so that a step of very
   * large groups still reads.
   * @default 16 MiB
   */
  maxPageBytes?: number | undefined;
  /**
   * Directories whose files SFT jobs may read through `file://` training data URLs, besides the
   * data directory's own SFT files (`<dataDir>/<project>/models/<name>/sft-data/`, where the local
   * backend writes them), which are always readable. Links are followed only when they lead
   * inside. Every other `file://` URL is refused (422 at submission).
   * @default []
   */
  trainingDataRoots?: readonly string[] | undefined;
  /**
   * Whether SFT jobs may download `http://` and `https://` training data URLs. Off, such a URL is
   * refused (422). On, downloads still never reach loopback, private, link-local (cloud
   * metadata) or reserved addresses unless `trainingDataAllowedAddresses` covers them; every
   * address a name resolves to and every redirect (at most 5, followed by hand) are checked.
   * @default false
   */
  allowTrainingDataDownloads?: boolean | undefined;
  /**
   * Loopback, private or link-local addresses that training data downloads may reach anyway: IP
   * addresses or CIDR ranges (`'127.0.0.1'`, `'10.1.0.0/16'`, `'fd00::/8'`).
   * @default []
   */
  trainingDataAllowedAddresses?: readonly string[] | undefined;
  /** Entity given to models registered with a null or missing entity. @default 'local' */
  entity?: string | undefined;
  /**
   * How long the answer to an `Idempotency-Key` is kept, in ms: a retry with the same key within
   * this time gets the first answer instead of writing again. Keys survive restarts; older ones
   * are deleted on start and as new keys are stored. A retry that comes later than this is a
   * new request, so keep it longer than your clients retry. @default 86_400_000 (24 hours)
   */
  idempotencyKeyRetentionMs?: number | undefined;
  /**
   * Receives the service's notes (job starts and failures, unexpected errors). Control characters
   * in them are escaped (`\x1b`) and further lines indented, so a note is safe to print.
   * @default none
   */
  logger?: ServerLogger | undefined;
}

/** Options of `serve`: the app's options plus where to listen. */
export interface ServeOptions extends ServerOptions {
  /**
   * Interface to listen on. Beyond loopback (`127.0.0.1`, `::1`, `localhost`), the public
   * development key is refused unless `allowPublicDevKey` is set: configure `apiKeys`.
   * @default '127.0.0.1'
   */
  host?: string | undefined;
  /** Port to listen on; 0 picks a free port. @default 8000 */
  port?: number | undefined;
  /**
   * Listen beyond loopback even though the public development key ({@link DEV_API_KEY}) is
   * accepted (the default when `apiKeys` is not set). Anyone who can reach the port can then
   * train, sample and delete models. Without it, `serve` throws instead of listening.
   * @default false
   */
  allowPublicDevKey?: boolean | undefined;
  /**
   * More names the `Host` header may carry (names or addresses, no port; `'*'` answers every
   * name). The service always answers the name it listens on, on a loopback bind also `localhost`,
   * `127.0.0.1` and `[::1]`, and on `0.0.0.0`/`::` every address of this machine and its host name;
   * any other `Host` is answered 421, which stops DNS rebinding. Any port.
   * @default []
   */
  allowedHosts?: readonly string[] | undefined;
}

/** {@link ServerOptions} with every default applied (the engine is resolved separately). */
export interface ResolvedServerOptions {
  readonly dataDir: string;
  readonly apiKeys: readonly string[];
  readonly maxBodyBytes: number;
  readonly maxConcurrentJobs: number;
  readonly requestTimeoutMs: number;
  readonly jobTimeoutMs: number;
  readonly maxTrainingDataBytes: number;
  readonly maxPageBytes: number;
  /** What SFT training data URLs may reach. */
  readonly trainingData: TrainingDataAccess;
  readonly entity: string;
  readonly idempotencyKeyRetentionMs: number;
  readonly logger: ServerLogger;
}

/** Default of `maxPageBytes`: 16 MiB. */
export const DEFAULT_MAX_PAGE_BYTES = 16 * 1024 * 1024;

const SILENT_LOGGER: ServerLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** A list of strings, kept as given (and frozen). */
const strings = () => z.array(option.string()).readonly();

/**
 * The checks of {@link ServerOptions}, with their defaults: one declaration for `createApp` and
 * `serve` (which spreads it into {@link ServeOptionsSchema}). Entries of `trainingDataRoots` and
 * `trainingDataAllowedAddresses` (paths, CIDR ranges) are checked where they are resolved.
 */
const serverOptionsShape = {
  dataDir: option.nonEmptyString().default(DEFAULT_DATA_DIR),
  apiKeys: z
    .array(option.nonEmptyString())
    .min(1, { error: 'a non-empty list of API keys' })
    .readonly()
    .default([DEV_API_KEY]),
  engine: option
    .like<Engine>((engine) => typeof engine?.chatCompletion === 'function', 'an Engine (with `chatCompletion`)')
    .optional(),
  models: strings().optional(),
  maxBodyBytes: option.integer({ min: 1 }).default(64 * 1024 * 1024),
  maxConcurrentJobs: option.integer({ min: 1 }).default(1),
  // Timers: at most what one holds (about 24.8 days).
  requestTimeoutMs: option.integer({ min: 1, max: MAX_TIMER_MS }).default(300_000),
  jobTimeoutMs: option.integer({ min: 1, max: MAX_TIMER_MS }).default(6 * 60 * 60 * 1000),
  maxTrainingDataBytes: option.integer({ min: 1 }).default(256 * 1024 * 1024),
  maxPageBytes: option.integer({ min: 1 }).default(DEFAULT_MAX_PAGE_BYTES),
  trainingDataRoots: strings().optional(),
  allowTrainingDataDownloads: z.boolean().optional(),
  trainingDataAllowedAddresses: strings().optional(),
  entity: option.nonEmptyString().default('local'),
  // Not a timer: any positive whole number of ms (no cap at Node's longest timer).
  idempotencyKeyRetentionMs: option.integer({ min: 1 }).default(24 * 60 * 60 * 1000),
  logger: option
    .like<ServerLogger>(
      (logger) => ['info', 'warn', 'error'].every((level) => typeof logger?.[level] === 'function'),
      'a logger with `info`, `warn` and `error`',
    )
    .optional(),
};

/** The check of {@link ServerOptions} (`createApp`). */
const ServerOptionsSchema = optionsSchema<ServerOptions>()(serverOptionsShape);

/** The check of {@link ServeOptions} (`serve`, `openApiDocument`), with the defaults. */
export const ServeOptionsSchema = optionsSchema<ServeOptions>()({
  ...serverOptionsShape,
  host: option.nonEmptyString().default('127.0.0.1'),
  port: option.integer({ min: 0, max: 65_535 }).default(8000),
  allowPublicDevKey: z.boolean().default(false),
  allowedHosts: strings().default([]),
});

/**
 * Checks the options of `serve` (a bad value, or a key that is no option, throws
 * `InvalidArgumentError` naming it) and applies the defaults.
 */
export function parseServeOptions(options: ServeOptions | undefined): z.output<typeof ServeOptionsSchema> {
  return parseOptions(ServeOptionsSchema, options);
}

/** Applies the defaults and rejects nonsensical values (and unknown keys) before anything is opened. */
export function resolveServerOptions(options: ServerOptions): ResolvedServerOptions {
  const { logger, trainingDataRoots, allowTrainingDataDownloads, trainingDataAllowedAddresses, ...checked } =
    parseOptions(ServerOptionsSchema, options);
  return {
    ...checked,
    trainingData: resolveTrainingDataAccess({
      dataDir: checked.dataDir,
      trainingDataRoots,
      allowTrainingDataDownloads,
      trainingDataAllowedAddresses,
    }),
    logger: logger === undefined ? SILENT_LOGGER : escapingLogger(logger),
  };
}

/**
 * The logger with control characters in every message escaped (names, paths and messages come
 * from clients), and each further line indented, so that no message can pass for a line of its own.
 */
function escapingLogger(logger: ServerLogger): ServerLogger {
  const clean = (message: string): string => escapeControl(message, { keepLines: true }).replaceAll('\n', '\n    ');
  return {
    info: (message) => logger.info(clean(message)),
    warn: (message) => logger.warn(clean(message)),
    error: (message) => logger.error(clean(message)),
  };
}
