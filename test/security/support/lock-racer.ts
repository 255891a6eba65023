/**
 * One contender of the data-directory lock race (test/security/data-dir-lock.test.ts). Prints
 * `ready`, reads the start time (epoch ms) from stdin, then for each round i waits until
 * `start + i * period` and tries to lock `<base>/round-i`. Locks it got are held until the last
 * round is over (so that a contender running late still finds them held), then released. Prints
 * one JSON line per round: `{ round, held, error? }`.
 */
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { type DataDirLock, lockDataDir } from '../../../src/server/data-dir-lock.js';

const [base, roundsText, periodText] = process.argv.slice(2);
if (base === undefined || roundsText === undefined || periodText === undefined)
  throw new Error('usage: lock-racer.ts <base> <rounds> <periodMs>');
const rounds = Number(roundsText);
const period = Number(periodText);

async function until(time: number): Promise<void> {
  const wait = time - Date.now() - 2;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  // The last ~2 ms spin, so that both contenders start within a fraction of a millisecond.
  while (Date.now() < time) {
    // spin
  }
}

const lines = createInterface({ input: process.stdin });
process.stdout.write('ready\n');
const start = await new Promise<number>((resolve) => lines.once('line', (line) => resolve(Number(line))));
lines.close();
const held: DataDirLock[] = [];
const results: string[] = [];
for (let round = 0; round < rounds; round += 1) {
  await until(start + round * period);
  let result: { round: number; held: boolean; error?: string };
  try {
    held.push(lockDataDir(join(base, `round-${round}`)));
    result = { round, held: true };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    result = /in use by process|being locked/.test(message)
      ? { round, held: false }
      : { round, held: false, error: message };
  }
  results.push(JSON.stringify(result));
}
await until(start + rounds * period + 200);
for (const lock of held) lock.release();
process.stdout.write(`${results.join('\n')}\n`);
