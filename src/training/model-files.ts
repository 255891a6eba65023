/** Where a model's local files live: history, spool and SFT data, under the data directory. */
import path from 'node:path';
import { InvalidArgumentError } from '../internal/errors.js';

/** Paths of one model's local files. */
export interface ModelFiles {
  /** `<dataDir>/<project>/models/<name>`. */
  readonly directory: string;
  /** Metric rows, one JSON object a line (`history.jsonl`). */
  readonly history: string;
  /** Log batches that could not be delivered (`spool.jsonl`), replayed by a later run. */
  readonly spool: string;
  /** Directory for SFT data files the local backend writes. */
  readonly sftData: string;
}

/**
 * Paths of the local files of model `name` in `project`.
 * @example
 * modelFiles('.policyloop', 'demo', 'agent-1').history; // '.policyloop/demo/models/agent-1/history.jsonl'
 */
export function modelFiles(dataDir: string, project: string, name: string): ModelFiles {
  assertPathSegment('project', project);
  assertPathSegment('name', name);
  const directory = path.join(dataDir, project, 'models', name);
  return {
    directory,
    history: path.join(directory, 'history.jsonl'),
    spool: path.join(directory, 'spool.jsonl'),
    sftData: path.join(directory, 'sft-data'),
  };
}

/** A project or model name becomes a directory name: it must not climb out of the data directory. */
export function assertPathSegment(what: string, value: string): void {
  if (value === '' || value === '.' || value === '..' || /[/\\\0]/.test(value)) {
    throw new InvalidArgumentError(
      what,
      `Expected \`${what}\` to be a non-empty name without '/', '\\' or NUL (it names a directory), ` +
        `got ${JSON.stringify(value)}`,
    );
  }
}
