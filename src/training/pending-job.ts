/**
 * The journal of the RL job a model has under way: written before the job is submitted and
 * removed once the step's history row is written, so that a process killed at any point leaves
 * enough behind for the next `train()` to finish the step's bookkeeping exactly once (and never
 * train the same data twice): see `TrainableModel.train`.
 */
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CreateTrainingJobInput } from '../schema/index.js';

/** What is journaled about a submitted (or about to be submitted) RL job. */
export interface PendingJob {
  /** The step the job trains on (its checkpoint will be `step + 1`). */
  readonly step: number;
  /** The `Idempotency-Key` of the job's POST: sending it again returns the same job. */
  readonly idempotencyKey: string;
  /** The job's id, once the service answered. */
  readonly jobId: string | null;
  /** The step's metrics known before its job (`train/reward`, `groups/*`, ...), written with the job's once it ends. */
  readonly metrics: Readonly<Record<string, number>>;
  /** When the step began (`Date.now()`), for its `time/step`. */
  readonly startedAt?: number | undefined;
  /** The POST body, to send again with the same key when the answer was never seen. */
  readonly body: CreateTrainingJobInput;
}

/** The journal file next to a model's `history.jsonl`. */
export function pendingJobPath(historyFile: string): string {
  return path.join(path.dirname(historyFile), 'pending-job.json');
}

/** Writes the journal atomically (a temporary file renamed over it). */
export async function writePendingJob(file: string, job: PendingJob): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, JSON.stringify(job), 'utf8');
  await rename(temporary, file);
}

/** Reads the journal, or null when there is none (or it is unreadable: a torn first write). */
export async function readPendingJob(file: string): Promise<PendingJob | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const job = JSON.parse(text) as PendingJob;
    return typeof job.step === 'number' && typeof job.idempotencyKey === 'string' ? job : null;
  } catch {
    return null;
  }
}

/** Removes the journal. */
export async function clearPendingJob(file: string): Promise<void> {
  await rm(file, { force: true });
}
