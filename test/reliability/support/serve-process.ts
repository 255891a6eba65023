/** `policyloop serve` in its own process (through tsx), as a user runs it: for tests that kill it or load it. */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));

/** A running `policyloop serve`. */
export interface ServeProcess {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:PORT`. */
  readonly url: string;
}

/**
 * Starts `policyloop serve --port 0 --data-dir <dataDir>` with the development key and resolves
 * once it prints its ready line. `track` receives the child at once (to kill it after a failed test).
 */
export async function startServeProcess(dataDir: string, track: (child: ChildProcess) => void): Promise<ServeProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env['POLICYLOOP_API_KEY'];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--port', '0', '--data-dir', dataDir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  track(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve printed nothing within 30 s: ${stderr}`)), 30_000);
    lines.once('line', (line) => {
      clearTimeout(timer);
      const match = /listening on (\S+)$/.exec(line);
      if (match?.[1] === undefined) reject(new Error(`unexpected first line: ${line}`));
      else resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  // Keep reading its output so that a full pipe never blocks it.
  child.stdout?.resume();
  return { child, url };
}

/** Kills with SIGKILL and waits for the exit. */
export async function killHard(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** The value below which `share` (0..1) of the sorted `values` fall (nearest rank). */
export function percentile(sorted: readonly number[], share: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(share * sorted.length) - 1))] as number;
}
