/** Runs the real `policyloop` bin (src/cli/main.ts through tsx) as a child process, as a user would. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const MAIN = fileURLToPath(new URL('../../../src/cli/main.ts', import.meta.url));
const children: ChildProcess[] = [];

/** Kills the children still running (call from `afterEach`/`afterAll`). */
export function killChildren(): void {
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** A running `policyloop` process. */
export interface CliRun {
  readonly child: ChildProcess;
  /** Resolves to the next line of stdout (rejects after 60 s). */
  readonly nextLine: () => Promise<string>;
  /** Resolves when the process ends, with its exit code and whole output. */
  readonly done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/**
 * Starts `policyloop ...args`. The environment is the test's, without the developer's own
 * POLICYLOOP_* and WANDB_API_KEY variables, plus `environment`.
 */
export function startCli(args: readonly string[], environment: Record<string, string> = {}): CliRun {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['POLICYLOOP_API_KEY', 'POLICYLOOP_BASE_URL', 'WANDB_API_KEY']) delete env[name];
  Object.assign(env, environment);
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    const waiter = waiting.shift();
    if (waiter === undefined) lines.push(line);
    else waiter(line);
  });
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => resolve({ code, stdout, stderr })),
  );
  return {
    child,
    done,
    nextLine: () =>
      new Promise<string>((resolve, reject) => {
        const buffered = lines.shift();
        if (buffered !== undefined) return resolve(buffered);
        const timer = setTimeout(() => reject(new Error(`no output within 60 s; stderr: ${stderr}`)), 60_000);
        waiting.push((line) => {
          clearTimeout(timer);
          resolve(line);
        });
      }),
  };
}

/** Runs `policyloop ...args` to its end. */
export function runCli(
  args: readonly string[],
  environment: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return startCli(args, environment).done;
}

/** A `policyloop serve --port 0` on `dataDir`, with its URL (`http://127.0.0.1:PORT`). */
export async function startServeCli(
  dataDir: string,
  extra: readonly string[] = [],
): Promise<{ url: string; run: CliRun; stop: () => Promise<void> }> {
  const run = startCli(['serve', '--port', '0', '--data-dir', dataDir, ...extra]);
  const ready = await run.nextLine();
  const url = /^policyloop listening on (\S+)$/.exec(ready)?.[1];
  if (url === undefined) throw new Error(`unexpected first line of serve: ${ready}`);
  return {
    url,
    run,
    stop: async () => {
      run.child.kill('SIGTERM');
      await run.done;
    },
  };
}
