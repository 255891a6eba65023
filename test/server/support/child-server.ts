/**
 * A service in its own process, for tests that kill it with SIGKILL: serves `argv[2]` as its data
 * directory with a stand-in engine whose jobs never finish, and prints its URL when ready.
 */
import { serve } from '../../../src/server/index.js';
import { createStandInEngine } from './stand-in-engine.js';

const dataDir = process.argv[2];
if (dataDir === undefined) throw new Error('usage: child-server.ts <dataDir>');
const server = await serve({ port: 0, dataDir, engine: createStandInEngine({ gate: () => new Promise<void>(() => undefined) }) });
process.stdout.write(`${server.url}\n`);
