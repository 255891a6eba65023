/**
 * SFT training data: `training_data_url` as `file://`, `data:` (base64 or percent-encoded) or
 * `http(s)://`, holding JSONL lines `{"messages": [...], "tools"?: [...]}`.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
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
    throw validationFailure(loc, `Expected an absolute URL (file://, data:, http:// or https://), got ${JSON.stringify(url.slice(0, 200))}`, 'url_parsing');
  }
  if (!TRAINING_DATA_SCHEMES.includes(parsed.protocol)) {
    throw validationFailure(loc, `Unsupported URL scheme \`${parsed.protocol.replace(/:$/, '')}\`: the local service reads training data from file://, data:, http:// and https:// URLs`, 'url_scheme');
  }
}

/** Options of {@link loadTrainingData}. */
export interface LoadTrainingDataOptions {
  readonly signal?: AbortSignal | undefined;
  /** Time limit of an HTTP download. @default 60_000 */
  readonly timeoutMs?: number;
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
      throw new Error(`Training data line ${lineNumber} is not valid JSON${position === undefined ? '' : ` (at character ${Number(position) + 1})`}`);
    }
    const parsed = SFTRow.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const where = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
      throw new Error(`Training data line ${lineNumber} is not a {"messages": [...], "tools"?: [...]} row${where}: ${issue?.message ?? 'invalid'}`);
    }
    rows.push(parsed.data);
  }
  if (rows.length === 0) throw new Error('Training data has no rows: expected JSONL lines of {"messages": [...]}');
  return rows;
}

async function readUrlText(url: string, options: LoadTrainingDataOptions): Promise<string> {
  const parsed = new URL(url);
  switch (parsed.protocol) {
    case 'file:': {
      const path = fileURLToPath(parsed);
      try {
        return await readFile(path, { encoding: 'utf8', signal: options.signal });
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        throw new Error(`Cannot read training data file ${path}: ${code === 'ENOENT' ? 'no such file' : error instanceof Error ? error.message : String(error)}`);
      }
    }
    case 'data:':
      return decodeDataUrl(url);
    case 'http:':
    case 'https:': {
      const timeoutMs = options.timeoutMs ?? 60_000;
      const signals = [AbortSignal.timeout(timeoutMs), ...(options.signal === undefined ? [] : [options.signal])];
      let response: Response;
      try {
        response = await fetch(parsed, { signal: AbortSignal.any(signals) });
      } catch (error) {
        const reason = error instanceof Error && error.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : error instanceof Error ? error.message : String(error);
        throw new Error(`Cannot download training data from ${parsed.origin}${parsed.pathname}: ${reason}`);
      }
      if (!response.ok) throw new Error(`Cannot download training data from ${parsed.origin}${parsed.pathname}: HTTP ${response.status}`);
      return await response.text();
    }
    default:
      throw new Error(`Unsupported training data URL scheme \`${parsed.protocol.replace(/:$/, '')}\``);
  }
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
