/**
 * The spool: a JSONL file of log batches that could not be delivered, kept so that a later run
 * can send them (`replaySpool`). Appends are whole lines; a replay first renames the file, so
 * batches spooled during the replay land in a fresh file and none is read twice.
 */
import { appendFile, mkdir, readdir, readFile, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import type { TrajectoryGroupInput } from '../schema/index.js';

/** One undeliverable batch, as a line of the spool file. */
export interface SpoolRecord {
  /** The model the batch was for. */
  readonly model_id: string;
  /** The split of the batch (`train`, `val`, ...). */
  readonly split: string;
  /** The groups of the batch, as they would have been sent. */
  readonly trajectory_groups: readonly TrajectoryGroupInput[];
  /** Why the last attempt failed. */
  readonly error: string;
  /** How many attempts were made. */
  readonly attempts: number;
  /** When the batch was spooled (ISO 8601). */
  readonly spooled_at: string;
  /**
   * The `Idempotency-Key` the batch was sent with; a replay sends it again. Absent in spool files
   * written before batches carried a key.
   */
  readonly idempotency_key?: string | undefined;
}

/** Appends records to the spool file, creating its directory. */
export async function appendSpoolRecords(file: string, records: readonly SpoolRecord[]): Promise<void> {
  if (records.length === 0) return;
  await mkdir(path.dirname(file), { recursive: true });
  await appendFile(file, records.map((record) => `${JSON.stringify(record)}\n`).join(''), 'utf8');
}

/** What {@link takeSpool} took: the records, and the claimed files to remove once they are handled. */
export interface TakenSpool {
  /** Every readable record, oldest first. */
  readonly records: SpoolRecord[];
  /** Lines that did not parse (a torn line after a crash): kept aside in `<spool>.unreadable`, not replayed. */
  readonly unreadableLines: readonly string[];
  /** The claimed files: delete them when every record is delivered or spooled again. */
  readonly files: readonly string[];
}

/**
 * Claims the spool for a replay: renames `file` aside (plus claimed files left by an interrupted
 * replay) and reads their records.
 */
export async function takeSpool(file: string): Promise<TakenSpool> {
  const directory = path.dirname(file);
  const base = path.basename(file);
  const claimed = `${file}.replay-${process.pid}-${Date.now()}`;
  try {
    await rename(file, claimed);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  let names: string[];
  try {
    names = await readdir(directory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { records: [], unreadableLines: [], files: [] };
    throw error;
  }
  const files = names
    .filter((name) => name.startsWith(`${base}.replay-`))
    .sort()
    .map((name) => path.join(directory, name));
  const records: SpoolRecord[] = [];
  const unreadableLines: string[] = [];
  for (const claimedFile of files) {
    const text = await readFile(claimedFile, 'utf8');
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      try {
        records.push(JSON.parse(line) as SpoolRecord);
      } catch {
        unreadableLines.push(line);
      }
    }
  }
  return { records, unreadableLines, files };
}

/**
 * Removes claimed spool files once their records are handled; unreadable lines are appended to
 * `<file>.unreadable` first, so that not even a torn line disappears without a trace.
 */
export async function releaseSpool(file: string, taken: TakenSpool): Promise<void> {
  if (taken.unreadableLines.length > 0) {
    await appendFile(`${file}.unreadable`, taken.unreadableLines.map((line) => `${line}\n`).join(''), 'utf8');
  }
  for (const claimed of taken.files) await unlink(claimed).catch(() => undefined);
}
