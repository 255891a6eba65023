/**
 * SFT training data: `training_data_url` as `file://`, `data:` (base64 or percent-encoded) or
 * `http(s)://`, holding JSONL lines `{"messages": [...], "tools"?: [...]}`.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { type IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { fileURLToPath } from 'node:url';
import { boundedSafeParse } from '../schema/bounded-parse.js';
import { SFTRow } from '../schema/index.js';
import { validationFailure } from './http-error.js';
import { redactUrl, refusedAddress, refusedPath, type TrainingDataAccess } from './training-data-access.js';

/** Most redirects a training data download follows (each one checked like the first URL). */
export const MAX_TRAINING_DATA_REDIRECTS = 5;

/** A URL the access rules refuse; its message says what was refused and why. */
class RefusedError extends Error {
  override readonly name = 'RefusedError';
}

/** URL schemes the local service can read training data from. */
export const TRAINING_DATA_SCHEMES: readonly string[] = ['file:', 'data:', 'http:', 'https:'];

/**
 * Checks that `url` is a URL whose scheme the service can read and that the access rules allow
 * (as far as can be told without touching the disk or the network); throws a 422 naming the
 * reason otherwise. Called before a job is queued; the job checks again, fully, when it reads.
 */
export function checkTrainingDataUrl(url: string, access: TrainingDataAccess): void {
  const loc = ['body', 'training_data_url'];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw validationFailure(
      loc,
      // Not repeated: a string that is not a URL cannot be redacted, and may hold credentials.
      'Expected an absolute URL (file://, data:, http:// or https://), got a string that does not parse as one',
      'url_parsing',
    );
  }
  // What OpenPipe ART's model.train_sft sends: rows it uploaded to W&B, which a service without a
  // W&B account cannot read. Say so, and what works instead (docs/art.md).
  if (parsed.protocol === 'wandb-artifact:') {
    throw validationFailure(
      loc,
      'Expected training data the local service can read (file://, data:, http:// or https://), got a W&B artifact (wandb-artifact://): the local service has no W&B account to download it from. Send the JSONL rows as a file:// or data: URL (see docs/art.md for OpenPipe ART)',
      'url_scheme',
    );
  }
  if (!TRAINING_DATA_SCHEMES.includes(parsed.protocol)) {
    throw validationFailure(
      loc,
      `Unsupported URL scheme \`${parsed.protocol.replace(/:$/, '')}\`: the local service reads training data from file://, data:, http:// and https:// URLs`,
      'url_scheme',
    );
  }
  if (parsed.protocol === 'file:' && parsed.hostname !== '' && parsed.hostname !== 'localhost') {
    throw validationFailure(
      loc,
      `Expected a file:// URL of a local path (file:///path/to/rows.jsonl), got one on host ${JSON.stringify(parsed.hostname)}`,
      'url_parsing',
    );
  }
  const refused = refusalBeforeReading(parsed, access);
  if (refused !== undefined)
    throw validationFailure(loc, `Refused training data URL ${redactUrl(url)}: ${refused}`, 'url_refused');
}

/** Why the rules refuse `url` before anything is read (the path as written, a literal address), if they do. */
function refusalBeforeReading(url: URL, access: TrainingDataAccess): string | undefined {
  if (url.protocol === 'file:') {
    let path: string;
    try {
      path = fileURLToPath(url);
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
    return refusedPath(access, path);
  }
  if (url.protocol === 'http:' || url.protocol === 'https:') {
    if (!access.downloads)
      return 'http:// and https:// downloads are off in this service (start it with --allow-training-data-downloads, option allowTrainingDataDownloads, or use a data: URL or a file:// URL under a training data root)';
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) !== 0) return refusedAddress(access, host);
  }
  return undefined;
}

/** Largest training data file the service reads, in bytes, unless configured otherwise. */
export const DEFAULT_MAX_TRAINING_DATA_BYTES = 256 * 1024 * 1024;

/** Options of {@link loadTrainingData}. */
export interface LoadTrainingDataOptions {
  /** What `file://` and `http(s)://` URLs may reach. */
  readonly access: TrainingDataAccess;
  readonly signal?: AbortSignal | undefined;
  /** Time limit of an HTTP download. @default 60_000 */
  readonly timeoutMs?: number | undefined;
  /**
   * Largest file or download accepted, in bytes: a bigger one fails the job instead of filling
   * the memory (a `file:///dev/zero` or an endless download would otherwise never end).
   * @default DEFAULT_MAX_TRAINING_DATA_BYTES (256 MiB)
   */
  readonly maxBytes?: number | undefined;
}

/**
 * Reads and parses the rows of an SFT data file. Throws an Error fit to show the user (it becomes
 * the job's `error_message`): an unreadable URL, a line that is not JSON or not a row (naming the
 * line), or a file without rows.
 */
export async function loadTrainingData(url: string, options: LoadTrainingDataOptions): Promise<SFTRow[]> {
  const text = await readUrlText(url, options);
  const rows: SFTRow[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, line] of lines.entries()) {
    if (line.trim() === '') continue;
    const lineNumber = index + 1;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (error) {
      // Only the position: V8's message quotes the line, which may be a file the client should not read.
      const position = /position (\d+)/.exec(error instanceof Error ? error.message : '')?.[1];
      throw new Error(
        `Training data line ${lineNumber} is not valid JSON${position === undefined ? '' : ` (at character ${Number(position) + 1})`}`,
      );
    }
    // Only the first issue is reported: validation stops there (a line may hold millions of bad values).
    const parsed = boundedSafeParse(SFTRow, value, { maxIssues: 1 });
    if (!parsed.success) {
      const issue = parsed.issues[0];
      const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
      throw new Error(
        `Training data line ${lineNumber} is not a {"messages": [...], "tools"?: [...]} row${where}: ${issue?.message ?? 'invalid'}`,
      );
    }
    rows.push(parsed.data);
  }
  if (rows.length === 0) throw new Error('Training data has no rows: expected JSONL lines of {"messages": [...]}');
  return rows;
}

async function readUrlText(url: string, options: LoadTrainingDataOptions): Promise<string> {
  const parsed = new URL(url);
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_TRAINING_DATA_BYTES;
  const refused = refusalBeforeReading(parsed, options.access);
  if (refused !== undefined) throw new RefusedError(`Refused training data URL ${redactUrl(url)}: ${refused}`);
  switch (parsed.protocol) {
    case 'file:': {
      const path = fileURLToPath(parsed);
      return await readLocalFile(path, maxBytes, options);
    }
    case 'data:': {
      const text = decodeDataUrl(url);
      if (Buffer.byteLength(text) > maxBytes) throw new Error(`Training data is over the limit of ${maxBytes} bytes`);
      return text;
    }
    case 'http:':
    case 'https:':
      return await download(parsed, maxBytes, options);
    default:
      throw new Error(`Unsupported training data URL scheme \`${parsed.protocol.replace(/:$/, '')}\``);
  }
}

/**
 * Downloads `url` under the access rules: every address the name resolves to is checked (at
 * connection time, so a name cannot change its answer in between), redirects are followed by hand
 * (at most {@link MAX_TRAINING_DATA_REDIRECTS}, each checked like the first URL), and a failure
 * says what was refused, never what answered (no status, no connection error).
 */
async function download(url: URL, maxBytes: number, options: LoadTrainingDataOptions): Promise<string> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const signal = AbortSignal.any([
    AbortSignal.timeout(timeoutMs),
    ...(options.signal === undefined ? [] : [options.signal]),
  ]);
  const first = redactUrl(url.href);
  const failed = (): Error =>
    new Error(
      `Cannot download training data from ${first}: no usable answer within ${timeoutMs} ms (the connection failed, timed out, or the server answered with an error or a redirect that is not followed)`,
    );
  // User name and password become Basic auth for the first URL's origin only, never for a redirect elsewhere.
  const authorization =
    url.username === '' && url.password === ''
      ? undefined
      : `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  let current = url;
  for (let redirects = 0; ; redirects += 1) {
    let response: IncomingMessage;
    try {
      response = await get(current, options.access, signal, current.origin === url.origin ? authorization : undefined);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (error instanceof RefusedError) throw error;
      throw failed();
    }
    const status = response.statusCode ?? 0;
    if ([301, 302, 303, 307, 308].includes(status)) {
      response.destroy();
      const location = response.headers.location;
      if (location === undefined || redirects >= MAX_TRAINING_DATA_REDIRECTS) {
        if (location !== undefined)
          throw new RefusedError(
            `Refused training data URL ${first}: it redirects more than ${MAX_TRAINING_DATA_REDIRECTS} times`,
          );
        throw failed();
      }
      let next: URL;
      try {
        next = new URL(location, current);
      } catch {
        throw failed();
      }
      if (next.protocol !== 'http:' && next.protocol !== 'https:')
        throw new RefusedError(
          `Refused training data redirect from ${first} to ${redactUrl(next.href)}: only http:// and https:// redirects are followed`,
        );
      const refused = refusalBeforeReading(next, options.access);
      if (refused !== undefined)
        throw new RefusedError(`Refused training data redirect from ${first} to ${redactUrl(next.href)}: ${refused}`);
      current = next;
      continue;
    }
    if (status < 200 || status >= 300) {
      response.destroy();
      throw failed();
    }
    const declared = Number(response.headers['content-length'] ?? Number.NaN);
    if (declared > maxBytes) {
      response.destroy();
      throw new Error(`Training data at ${first} is ${declared} bytes, over the limit of ${maxBytes} bytes`);
    }
    try {
      return await readLimited(response, maxBytes, `Training data at ${first}`, signal);
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (error instanceof Error && error.message.startsWith('Training data at')) throw error;
      throw failed();
    }
  }
}

/** One GET, resolving once the headers arrived; the connection goes only to addresses the rules allow. */
function get(
  url: URL,
  access: TrainingDataAccess,
  signal: AbortSignal,
  authorization: string | undefined,
): Promise<IncomingMessage> {
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses: LookupAddress[]) => {
      if (error !== null) return callback(error, '', 0);
      // Every address is checked: a name that resolves to one public and one private address is refused.
      for (const { address } of addresses) {
        const refused = refusedAddress(access, address);
        if (refused !== undefined)
          return callback(
            new RefusedError(
              `Refused training data URL ${redactUrl(url.href)}: ${url.hostname} resolves to ${refused}`,
            ),
            '',
            0,
          );
      }
      const first = addresses[0];
      if (first === undefined) return callback(new Error(`${hostname} has no address`), '', 0);
      if (lookupOptions.all === true)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      return callback(null, first.address, first.family);
    });
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolveResponse, rejectResponse) => {
    const outgoing = send(
      {
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port === '' ? undefined : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: { accept: '*/*', ...(authorization === undefined ? {} : { authorization }) },
        lookup,
        signal,
        agent: false,
      },
      resolveResponse,
    );
    // `on`, not `once`: a socket error after the answer began must not go unhandled (it ends the body read).
    outgoing.on('error', rejectResponse);
    outgoing.end();
  });
}

/**
 * Reads a regular file under the size limit. Devices, pipes and directories are refused: reading
 * `/dev/zero` or a FIFO would never end.
 */
async function readLocalFile(path: string, maxBytes: number, options: LoadTrainingDataOptions): Promise<string> {
  const { signal } = options;
  const cannot = (error: unknown): Error => {
    const code = (error as NodeJS.ErrnoException).code;
    return new Error(
      `Cannot read training data file ${path}: ${code === 'ENOENT' ? 'no such file' : error instanceof Error ? error.message : String(error)}`,
    );
  };
  let stats;
  try {
    stats = await stat(path);
  } catch (error) {
    throw cannot(error);
  }
  // Where links lead: a link inside a root to a file outside it is refused.
  const refused = refusedPath(options.access, path, true);
  if (refused !== undefined) throw new RefusedError(`Refused training data file ${path}: ${refused}`);
  if (!stats.isFile()) throw new Error(`Cannot read training data file ${path}: not a regular file`);
  if (stats.size > maxBytes)
    throw new Error(`Training data file ${path} is ${stats.size} bytes, over the limit of ${maxBytes} bytes`);
  let handle;
  try {
    // O_NONBLOCK: should the path have become a FIFO since the check, opening it must not wait for a writer.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw cannot(error);
  }
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead, buffer } = await handle.read({ buffer: Buffer.alloc(1 << 20) });
      if (bytesRead === 0) break;
      total += bytesRead;
      // The file may grow while it is read.
      if (total > maxBytes) throw new Error(`Training data file ${path} is over the limit of ${maxBytes} bytes`);
      chunks.push(buffer.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total).toString('utf8');
  } catch (error) {
    if (signal?.aborted || (error instanceof Error && error.message.startsWith('Training data file'))) throw error;
    throw cannot(error);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** Reads a response as UTF-8 text, failing as soon as it passes `maxBytes` (a server that sends more than it declared, or no length). */
async function readLimited(
  body: IncomingMessage,
  maxBytes: number,
  what: string,
  signal: AbortSignal,
): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  const abort = (): void => {
    body.destroy(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
  };
  signal.addEventListener('abort', abort, { once: true });
  try {
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      total += buffer.byteLength;
      if (total > maxBytes) throw new Error(`${what} is over the limit of ${maxBytes} bytes`);
      chunks.push(buffer);
    }
  } catch (error) {
    body.destroy();
    throw error;
  } finally {
    signal.removeEventListener('abort', abort);
  }
  return Buffer.concat(chunks, total).toString('utf8');
}

/** Decodes a `data:[<media type>][;base64],<data>` URL to text. */
function decodeDataUrl(url: string): string {
  const comma = url.indexOf(',');
  if (comma < 0) throw new Error('Training data `data:` URL has no comma before its data');
  const header = url.slice('data:'.length, comma);
  const payload = url.slice(comma + 1);
  const base64 = header.split(';').some((part) => part.trim().toLowerCase() === 'base64');
  try {
    const decoded = decodeURIComponent(payload);
    return base64 ? Buffer.from(decoded, 'base64').toString('utf8') : decoded;
  } catch {
    throw new Error('Training data `data:` URL is not valid percent-encoding');
  }
}
