/**
 * What every `policyloop` command shares: the connection settings (resolved through
 * `internal/env.ts`: option > environment > default), the client, and printing (tables, JSON,
 * one-line errors, progress on a terminal only). Printing lives here and in `commands/`, never in
 * library code.
 */
import { MissingApiKeyError, TrainingClient } from '../client/index.js';
import { APIConnectionError, APIError, NotFoundError, UnprocessableEntityError } from '../client/errors.js';
import { escapeControl } from '../internal/control-characters.js';
import { resolveApiKey, resolveServiceURLs } from '../internal/env.js';
import { formatPath } from '../internal/format-issues.js';
import type { LocalModelResponse } from '../schema/index.js';
import { maxOf } from '../internal/arrays.js';

/** Options every command takes. */
export interface CommonOptions {
  /** `--base-url`: the training API (`/v1` appended when missing). */
  baseUrl?: string | undefined;
  /** `--api-key`. */
  apiKey?: string | undefined;
  /** `--json`: machine-readable output. */
  json?: boolean | undefined;
}

/** A usage error (exit code 2): a bad argument the parser could not catch. */
export class UsageError extends Error {}

/**
 * The client for `options`: `--api-key`, else POLICYLOOP_API_KEY, else WANDB_API_KEY;
 * `--base-url`, else POLICYLOOP_BASE_URL, else the hosted service. The inference API (only its
 * model list) is POLICYLOOP_INFERENCE_BASE_URL, else the training API's URL (the local service
 * answers both), except on the hosted service (its own inference URL). Chat completions always go
 * to the training API.
 */
export function makeClient(options: CommonOptions): TrainingClient {
  const apiKey = resolveApiKey(options.apiKey);
  if (apiKey === undefined) throw new MissingApiKeyError();
  const { baseURL, inferenceBaseURL } = resolveServiceURLs({ baseURL: options.baseUrl });
  return new TrainingClient({ apiKey, baseURL, inferenceBaseURL, maxRetries: 1 });
}

/**
 * Writes one line to stdout. Control characters from the service (a name, a message) are escaped
 * (`\x1b`), so that printing cannot move the cursor or hide text; tabs and newlines stay.
 */
export function out(line = ''): void {
  process.stdout.write(`${escapeControl(line, { keepLines: true })}\n`);
}

/**
 * Writes `value` as one line of JSON (an item of a JSON-lines stream, or a whole answer). JSON
 * escapes C0 controls itself; DEL, C1 controls and bidirectional overrides are written as `\u`
 * escapes too (the same JSON value).
 */
export function outJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value).replace(JSON_UNESCAPED_CONTROL, jsonEscape)}\n`);
}

const JSON_UNESCAPED_CONTROL = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function jsonEscape(character: string): string {
  return `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** Whether progress may be shown: stderr is a terminal (quiet when piped or redirected). */
export function showsProgress(): boolean {
  return process.stderr.isTTY === true;
}

/** Shows `message` as the one progress line on stderr (terminal only). */
export function progress(message: string): void {
  if (showsProgress()) process.stderr.write(`\r\u001b[K${escapeControl(message)}`);
}

/** Clears the progress line (terminal only). */
export function progressDone(): void {
  if (showsProgress()) process.stderr.write('\r\u001b[K');
}

/**
 * A table with a header row, columns padded to their widest cell (numbers right-aligned).
 * @example
 * table(['step', 'reward'], [[0, '0.25']]);
 */
export function table(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  // Escaped before measuring: a cell shows as its escaped text.
  const cells = [header, ...rows.map((row) => row.map((cell) => escapeControl(String(cell))))];
  const widths = header.map((_, column) => maxOf(cells.map((row) => (row[column] ?? '').length)));
  const numeric = header.map((_, column) => rows.length > 0 && rows.every((row) => typeof row[column] === 'number'));
  return cells
    .map((row) =>
      row
        .map((cell, column) =>
          numeric[column] ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0),
        )
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** A metric value for a table: 4 significant digits, integers as they are. */
export function formatNumber(value: number): string {
  if (Number.isInteger(value)) return String(value);
  return Number(value.toPrecision(4)).toString();
}

/**
 * The one line an error prints as (without the `policyloop:` prefix), control characters escaped
 * (the message may quote names and paths from the service).
 */
export function errorLine(error: unknown): string {
  return escapeControl(rawErrorLine(error));
}

function rawErrorLine(error: unknown): string {
  if (error instanceof MissingApiKeyError) {
    return 'no API key: pass --api-key KEY or set POLICYLOOP_API_KEY (or WANDB_API_KEY); `policyloop serve` prints the key of a local service';
  }
  if (error instanceof UnprocessableEntityError && error.issues.length > 0) {
    const issues = error.issues.slice(0, 3).map((issue) => `${formatPath(issue.loc.slice(1))}: ${issue.msg}`);
    const more = error.issues.length - issues.length;
    return `the service refused the request (422): ${issues.join('; ')}${more > 0 ? `; and ${more} more` : ''}`;
  }
  if (error instanceof APIError) {
    const body = error.body as { detail?: unknown } | undefined;
    const detail = typeof body?.detail === 'string' ? body.detail : error.message;
    return `${detail} (HTTP ${error.status})`;
  }
  if (error instanceof APIConnectionError) return `cannot reach the service: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

/**
 * A model given as its id or as `project/name` (or `entity/project/name`), looked up through the
 * local service's model list.
 */
export async function resolveModel(client: TrainingClient, reference: string): Promise<LocalModelResponse> {
  try {
    return await lookUpModel(client, reference);
  } catch (error) {
    throw explainMissingLocalRoutes(client, error);
  }
}

/**
 * A 404 that says a `/v1/local/` route is missing (the hosted service), as an error that says
 * so; any other error as it is.
 */
export function explainMissingLocalRoutes(client: TrainingClient, error: unknown): unknown {
  if (!(error instanceof NotFoundError)) return error;
  const detail = (error.body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string' && /^(Model|Training job) .* not found/.test(detail)) return error;
  return new Error(
    `${client.baseURL} has no /v1/local/ routes (the hosted service has none): give a model id, or use a local service`,
    { cause: error },
  );
}

/** {@link resolveModel} without the explanation of a missing route (callers that fall back on it). */
export async function lookUpModel(client: TrainingClient, reference: string): Promise<LocalModelResponse> {
  const parts = reference.split('/');
  if (parts.length === 1) return client.local.models.retrieve(reference);
  if (parts.length > 3 || parts.some((part) => part === '')) {
    throw new UsageError(`expected a model id or project/name, got ${JSON.stringify(reference)}`);
  }
  const [entity, project, name] = parts.length === 3 ? parts : [undefined, ...parts];
  const page = await client.local.models.list({ entity, project, name, limit: 2 });
  const [model] = page.data;
  if (model === undefined) throw new Error(`no model ${reference} on ${client.baseURL}`);
  if (page.data.length > 1)
    throw new UsageError(`${reference} names models of several entities: give entity/project/name`);
  return model;
}
