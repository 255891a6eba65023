/** Runs a child process to its end and resolves with its stdout; rejects with its stderr. */
import { spawn } from 'node:child_process';

/**
 * Runs `command args` with `env`; resolves with what it printed, rejects (with its stderr) when it
 * fails, outlives `timeoutMs` or `signal` aborts.
 */
export function runChild(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  options: { timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ['ignore', 'pipe', 'pipe'], signal: options.signal });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else
        reject(
          new Error(`${command} ${args.join(' ')} ended with ${signal ?? `code ${code}`}:\n${stderr.slice(-3000)}`),
        );
    });
  });
}
