/**
 * A checkpoint of a Tinker-backed model, as the local service keeps it: a small `tinker.json` in
 * its directory that says where its weights are on the server (the training model, the sampler
 * weights, the resumable state).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LoraSettings } from './types.js';

/** The file of a checkpoint directory that says where its weights are on the server. */
export const TINKER_CHECKPOINT_FILE = 'tinker.json';

/** What a checkpoint directory of a Tinker-backed model records. */
export interface TinkerCheckpointRecord {
  /** The server's base URL when the checkpoint was made. */
  readonly server: string;
  readonly baseModel: string;
  /** The server's training model that produced it. */
  readonly trainingModelId: string;
  /** Sampler weights (`tinker://…`): completions of this checkpoint sample from them. */
  readonly samplerPath: string;
  /** Resumable weights and optimizer state (`tinker://…/weights/…`); null when not saved (`resumableState: false`). */
  readonly statePath: string | null;
  readonly step: number;
  readonly lora: LoraSettings;
}

/** Reads a checkpoint directory's record. */
export async function readTinkerCheckpoint(directory: string): Promise<TinkerCheckpointRecord> {
  const file = path.join(directory, TINKER_CHECKPOINT_FILE);
  try {
    return JSON.parse(await readFile(file, 'utf8')) as TinkerCheckpointRecord;
  } catch (error) {
    throw new Error(
      `${file} could not be read (${error instanceof Error ? error.message : String(error)}): this checkpoint was not trained on a Tinker server.`,
    );
  }
}

/** Writes a checkpoint directory's record (making the directory). */
export async function writeTinkerCheckpoint(directory: string, record: TinkerCheckpointRecord): Promise<void> {
  await mkdir(directory, { recursive: true });
  await writeFile(path.join(directory, TINKER_CHECKPOINT_FILE), `${JSON.stringify(record, null, 2)}\n`);
}

/**
 * The records of the checkpoints an engine uses, each read once (a failed read is tried again
 * next time).
 * @example
 * const records = new CheckpointRecords();
 * const { samplerPath } = await records.get('/data/models/m/checkpoints/3');
 */
export class CheckpointRecords {
  private readonly records = new Map<string, Promise<TinkerCheckpointRecord>>();

  /** The record of a checkpoint directory. */
  get(checkpointPath: string): Promise<TinkerCheckpointRecord> {
    let reading = this.records.get(checkpointPath);
    if (!reading) {
      reading = readTinkerCheckpoint(checkpointPath);
      reading.catch(() => this.records.delete(checkpointPath));
      this.records.set(checkpointPath, reading);
    }
    return reading;
  }

  /** Forgets a checkpoint's record (it is being deleted). */
  delete(checkpointPath: string): void {
    this.records.delete(checkpointPath);
  }
}
