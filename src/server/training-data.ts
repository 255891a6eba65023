/**
 * SFT training data: `training_data_url` as `file://`, `data:` (base64 or percent-encoded) or
 * `http(s)://`, holding JSONL lines `{"messages": [...], "tools"?: [...]}`.
 */
import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { boundedSafeParse } from '../schema/bounded-parse.js';
import { SFTRow } from '../schema/index.js';
import { validationFailure } from './http-error.js';

/** URL schemes the local service can read training data from. */
export const TRAINING_DATA_SCHEMES: readonly string[] = ['file:', 'data:', 'http:', 'https:'];

/**
 * Checks that `url` is a URL whose scheme the service can read; throws a 422 naming the scheme
 * otherwise. Called before a job is queued.
 */
export function checkTrainingDataUrl(url: string): void {
  const loc = ['body', 'training_data_url'];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw validationFailure(
      loc,
      `Expected an absolute URL (file://, data:, http:// or https://), got ${JSON.stringify(url.slice(0, 200))}`,
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
}

/** Largest training data file the service reads, in bytes, unless configured otherwise. */
export const DEFAULT_MAX_TRAINING_DATA_BYTES = 256 * 1024 * 1024;

/** Options of {@link loadTrainingData}. */
export interface LoadTrainingDataOptions {
  readonly signal?: AbortSignal | undefined;
  /** Time limit of an HTTP download. @default 60_000 */
  readonly timeoutMs?: number;
  /**
   * Largest file or download accepted, in bytes: a bigger one fails the job instead of filling
   * the memory (a `file:///dev/zero` or an endless download would otherwise never end).
   * @default DEFAULT_MAX_TRAINING_DATA_BYTES (256 MiB)
   */
  readonly maxBytes?: number;
}

/**
 * Reads and parses the rows of an SFT data file. Throws an Error fit to show the user (it becomes
 * the job's `error_message`): an unreadable URL, a line that is not JSON or not a row (naming the
 * line), or a file without rows.
 */
export async function loadTrainingData(url: string, options: LoadTrainingDataOptions = {}): Promise<SFTRow[]> {
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
  switch (parsed.protocol) {
    case 'file:': {
      const path = fileURLToPath(parsed);
      return await readLocalFile(path, maxBytes, options.signal);
    }
    case 'data:': {
      const text = decodeDataUrl(url);
      if (Buffer.byteLength(text) > maxBytes) throw new Error(`Training data is over the limit of ${maxBytes} bytes`);
      return text;
    }
    case 'http:':
    case 'https:': {
      const timeoutMs = options.timeoutMs ?? 60_000;
      const signals = [AbortSignal.timeout(timeoutMs), ...(options.signal === undefined ? [] : [options.signal])];
      let response: Response;
      try {
        response = await fetch(parsed, { signal: AbortSignal.any(signals) });
      } catch (error) {
        const reason =
          error instanceof Error && error.name === 'TimeoutError'
            ? `no answer within ${timeoutMs} ms`
            : error instanceof Error
              ? error.message
              : String(error);
        throw new Error(`Cannot download training data from ${parsed.origin}${parsed.pathname}: ${reason}`);
      }
      const where = `${parsed.origin}${parsed.pathname}`;
      if (!response.ok) {
        await response.body?.cancel().catch(() => undefined);
        throw new Error(`Cannot download training data from ${where}: HTTP ${response.status}`);
      }
      const declared = Number(response.headers.get('content-length') ?? Number.NaN);
      if (declared > maxBytes) {
        await response.body?.cancel().catch(() => undefined);
        throw new Error(`Training data at ${where} is ${declared} bytes, over the limit of ${maxBytes} bytes`);
      }
      try {
        return await readLimited(response.body, maxBytes, `Training data at ${where}`);
      } catch (error) {
        if (error instanceof Error && error.name === 'TimeoutError')
          throw new Error(`Cannot download training data from ${where}: not complete within ${timeoutMs} ms`);
        throw error;
      }
    }
    default:
      throw new Error(`Unsupported training data URL scheme \`${parsed.protocol.replace(/:$/, '')}\``);
  }
}

/**
 * Reads a regular file under the size limit. Devices, pipes and directories are refused: reading
 * `/dev/zero` or a FIFO would never end.
 */
async function readLocalFile(path: string, maxBytes: number, signal: AbortSignal | undefined): Promise<string> {
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

/** Reads a byte stream as UTF-8 text, failing as soon as it passes `maxBytes` (a server that sends more than it declared, or no length). */
async function readLimited(body: ReadableStream<Uint8Array> | null, maxBytes: number, what: string): Promise<string> {
  if (body === null) return '';
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) throw new Error(`${what} is over the limit of ${maxBytes} bytes`);
      chunks.push(value);
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw error;
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
