/**
 * A service in its own process, for tests that kill it with SIGKILL: serves `argv[2]` as its data
 * directory with a stand-in engine whose jobs write part of their checkpoint and then never
 * finish, and prints its URL when ready.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serve } from 'policyloop/server';
import type { Engine } from '../../../src/engine/types.js';
import { createStandInEngine } from './stand-in-engine.js';

const dataDir = process.argv[2];
if (dataDir === undefined) throw new Error('usage: child-server.ts <dataDir>');
const standIn = createStandInEngine({ gate: () => new Promise<void>(() => undefined) });
const engine: Engine = {
  ...standIn,
  async train(job, options) {
    // Half a checkpoint on disk, as a process killed mid-save leaves it.
    await mkdir(job.outputPath, { recursive: true });
    await writeFile(join(job.outputPath, 'partial.bin'), 'half');
    return standIn.train(job, options);
  },
};
const server = await serve({ port: 0, dataDir, engine });
process.stdout.write(`${server.url}\n`);
