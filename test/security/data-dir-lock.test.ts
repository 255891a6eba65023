/**
 * The data-directory lock is held by one service at a time: taken atomically (two processes
 * started at the same instant never both get it), never taken from a half-written lock file,
 * released only by its owner, and not kept by a process that is dead or a zombie.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from 'policyloop/server';
import { temporaryDirectory } from '../server/support/harness.js';
import { createStandInEngine } from '../server/support/stand-in-engine.js';

const RACER = fileURLToPath(new URL('./support/lock-racer.ts', import.meta.url));
const LOCK = 'policyloop.lock';
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** Runs the racer and collects its lines; resolves once it printed `ready`. */
function startRacer(base: string, rounds: number, periodMs: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', RACER, base, String(rounds), String(periodMs)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const results: { round: number; held: boolean; error?: string }[] = [];
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  lines.on('line', (line) => {
    if (line === 'ready') markReady();
    else results.push(JSON.parse(line));
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`racer did not finish within 90 s: ${stderr}`)), 90_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve(code);
    });
  });
  return { child, ready, exited, results, stderr: () => stderr };
}

async function expectServiceAnswers(dataDir: string): Promise<void> {
  const app = await createApp({ dataDir, engine: createStandInEngine() });
  try {
    const health = await app.fetch(new Request('http://127.0.0.1/v1/health'));
    expect(health.status).toBe(200);
    expect((await health.text()).length).toBeLessThan(1000);
  } finally {
    await app.close();
  }
}

/** A child of `sleep 30` that exits at once and is never reaped: a zombie while `sleep` runs. */
async function startZombie(): Promise<number> {
  const parent = spawn('sh', ['-c', 'sleep 0.1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(parent);
  const pid = await new Promise<number>((resolve) => {
    createInterface({ input: parent.stdout as NodeJS.ReadableStream }).once('line', (line) => resolve(Number(line)));
  });
  for (let attempt = 0; attempt < 100; attempt += 1) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return pid;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`process ${pid} did not become a zombie within 5 s`);
}

describe('data-directory lock', () => {
  it('is held by exactly one of two processes that take it at the same instant', async () => {
    const base = temporaryDirectory('policyloop-lock-race-');
    const rounds = 150;
    const periodMs = 20;
    for (let round = 0; round < rounds; round += 1) mkdirSync(join(base, `round-${round}`));
    const racers = [startRacer(base, rounds, periodMs), startRacer(base, rounds, periodMs)];
    await Promise.all(racers.map((racer) => racer.ready));
    const start = Date.now() + 300;
    for (const racer of racers) racer.child.stdin?.write(`${start}\n`);
    const codes = await Promise.all(racers.map((racer) => racer.exited));
    expect(codes, racers.map((racer) => racer.stderr()).join('\n')).toEqual([0, 0]);
    const errors = racers.flatMap((racer) => racer.results.filter((result) => result.error !== undefined));
    expect(errors).toEqual([]);
    const doubleHeld: number[] = [];
    const unheld: number[] = [];
    for (let round = 0; round < rounds; round += 1) {
      const holders = racers.filter((racer) => racer.results.find((result) => result.round === round)?.held);
      if (holders.length > 1) doubleHeld.push(round);
      if (holders.length === 0) unheld.push(round);
      // Every holder released its own lock.
      expect(existsSync(join(base, `round-${round}`, LOCK))).toBe(false);
    }
    expect({ doubleHeld, unheld }).toEqual({ doubleHeld: [], unheld: [] });
    await expectServiceAnswers(join(base, 'round-0'));
  }, 120_000);

  it('refuses a lock file that another process has created but not yet written', async () => {
    const dataDir = temporaryDirectory();
    writeFileSync(join(dataDir, LOCK), '');
    await expect(createApp({ dataDir, engine: createStandInEngine() })).rejects.toThrow(
      /being locked by another process/,
    );
    expect(readFileSync(join(dataDir, LOCK), 'utf8')).toBe('');
  });

  it('releases only its own lock: one that another live process holds is left in place', async () => {
    const dataDir = temporaryDirectory();
    const app = await createApp({ dataDir, engine: createStandInEngine() });
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    children.push(other);
    // As if another service had taken the lock over, thinking this one dead.
    const otherLock = `${other.pid} - ${'ab'.repeat(16)}\n`;
    writeFileSync(join(dataDir, LOCK), otherLock);
    await app.close();
    expect(readFileSync(join(dataDir, LOCK), 'utf8')).toBe(otherLock);
    await expect(createApp({ dataDir, engine: createStandInEngine() })).rejects.toThrow(
      `in use by process ${other.pid}`,
    );
    other.kill('SIGKILL');
    await new Promise((resolve) => other.once('exit', resolve));
    await expectServiceAnswers(dataDir);
  });

  it('takes over the lock of a killed process that is not reaped yet (a zombie)', async () => {
    const dataDir = temporaryDirectory();
    const zombie = await startZombie();
    writeFileSync(join(dataDir, LOCK), `${zombie} - ${'cd'.repeat(16)}\n`);
    await expectServiceAnswers(dataDir);
    expect(existsSync(join(dataDir, LOCK))).toBe(false);
  });

  it('takes over the lock of an older version whose process is gone, and removes drafts dead processes left', async () => {
    const dataDir = temporaryDirectory();
    const gone = spawn('true', { stdio: 'ignore' });
    await new Promise((resolve) => gone.once('exit', resolve));
    writeFileSync(join(dataDir, LOCK), `${gone.pid}\n`);
    const leftover = `${LOCK}.${gone.pid}.${'ef'.repeat(16)}.tmp`;
    writeFileSync(join(dataDir, leftover), `${gone.pid} - ${'ef'.repeat(16)}\n`);
    await expectServiceAnswers(dataDir);
    expect(readdirSync(dataDir).filter((name) => name.startsWith(LOCK))).toEqual([]);
  });
});
