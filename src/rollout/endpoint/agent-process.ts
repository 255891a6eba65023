/**
 * `context.endpoint.spawn()`: runs an agent as a process of its own for one rollout, with the
 * rollout's endpoint in its environment. The child is the leader of a new process group, so that
 * ending the rollout (an abort, a timeout, the gather stopping) ends it and everything it started:
 * SIGTERM to the group, then SIGKILL after a grace. A child that exits non-zero rejects with
 * {@link AgentProcessError}, which fails the rollout (retried under the gather's budget) instead of
 * leaving a finished, empty trajectory. The last line of its stdout that is a JSON object comes back
 * as `result`: the way a reward computed in the child gets to the rollout.
 */
import { spawn } from 'node:child_process';
import { abortReason } from '../../internal/delay.js';
import { z } from 'zod';
import { InvalidArgumentError } from '../../internal/errors.js';
import { option, optionsSchema, parseOptions } from '../../internal/option-schema.js';
import { AgentProcessError } from '../rollout-errors.js';

/** A JSON object a child printed as a line of its stdout. */
export type AgentProcessOutput = { readonly [key: string]: unknown };

/** Options of `context.endpoint.spawn()`. */
export interface AgentProcessOptions {
  /**
   * More environment variables, set over `process.env` and the endpoint's (`OPENAI_BASE_URL`, ...).
   * A variable set to `undefined` is removed from the child's environment (e.g. `WANDB_API_KEY`).
   */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /**
   * The child's working directory.
   * @default process.cwd()
   */
  cwd?: string | undefined;
  /** Text written to the child's stdin, which is then closed. Without it, stdin is empty. */
  input?: string | undefined;
  /**
   * Milliseconds the child may run before it is killed and the call rejects with
   * {@link AgentProcessError} (its `signal` is then `SIGTERM` or `SIGKILL`). The rollout's own
   * `timeout` (the gather's option) still applies.
   * @default Infinity
   */
  timeout?: number | undefined;
  /**
   * Milliseconds between SIGTERM and SIGKILL when the child's process group is killed.
   * @default 2000
   */
  killGrace?: number | undefined;
}

/** What `context.endpoint.spawn()` resolves with once the child exited with code 0. */
export interface AgentProcessResult<R = AgentProcessOutput> {
  /** Always 0 here: a non-zero exit rejects with {@link AgentProcessError}. */
  readonly exitCode: number;
  /** Everything the child printed on stdout. */
  readonly stdout: string;
  /** Everything the child printed on stderr. */
  readonly stderr: string;
  /** The last line of stdout that parses as a JSON object; undefined when none does. */
  readonly result: R | undefined;
}

/** The process groups of live agent processes, killed if this process exits while they run. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

/** Sends `signal` to the process group led by `pid`; a group already gone is not an error. */
function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(process.platform === 'win32' ? pid : -pid, signal);
  } catch {
    // ESRCH: the group has exited already.
  }
}

/** Kills every live agent group when this process exits, so no agent outlives the training script. */
function killLiveGroupsOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pid of liveGroups) signalGroup(pid, 'SIGKILL');
  });
}

/** The last line of `stdout` that parses as a JSON object. */
export function lastJsonObjectLine(stdout: string): AgentProcessOutput | undefined {
  const lines = stdout.split('\n');
  for (let index = lines.length - 1; index >= 0; index -= 1) {
    const line = (lines[index] as string).trim();
    if (!line.startsWith('{') || !line.endsWith('}')) continue;
    try {
      const value: unknown = JSON.parse(line);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as AgentProcessOutput;
    } catch {
      // Not JSON after all: keep looking upward.
    }
  }
  return undefined;
}

/** The check of {@link AgentProcessOptions}, with the defaults: made once, applied per call. */
const AgentProcessOptionsSchema = optionsSchema<AgentProcessOptions>()({
  env: z
    .record(z.string(), z.string().optional(), { error: 'an object of environment variables (strings, or undefined)' })
    .optional(),
  cwd: option.nonEmptyString().optional(),
  input: option.string().optional(),
  timeout: option.timeout({ allowInfinity: true }).default(Number.POSITIVE_INFINITY),
  killGrace: option.number({ min: 0 }).default(2000),
});

/**
 * Runs `command args` for a rollout (see `RolloutEndpoint.spawn`): `baseEnv` is the endpoint's
 * environment, `signal` the rollout's.
 */
export function spawnAgentProcess<R = AgentProcessOutput>(
  command: string,
  args: readonly string[],
  options: AgentProcessOptions,
  baseEnv: Readonly<Record<string, string>>,
  signal: AbortSignal,
): Promise<AgentProcessResult<R>> {
  if (typeof command !== 'string' || command === '')
    throw new InvalidArgumentError('command', `Expected \`command\` to be a non-empty string, got ${String(command)}`);
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string'))
    throw new InvalidArgumentError('args', 'Expected `args` to be an array of strings');
  const { timeout, killGrace, cwd, input } = parseOptions(AgentProcessOptionsSchema, options);
  if (signal.aborted) return Promise.reject(abortReason(signal));

  const env: Record<string, string> = {};
  for (const source of [process.env, baseEnv, options.env ?? {}]) {
    for (const [key, value] of Object.entries(source)) {
      if (value === undefined) delete env[key];
      else env[key] = value;
    }
  }
  return new Promise<AgentProcessResult<R>>((resolve, reject) => {
    const child = spawn(command, args, {
      env,
      cwd,
      // Its own process group (on POSIX), so that killing `-pid` reaches its children too.
      detached: process.platform !== 'win32',
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    // A child that exits without reading its stdin makes the write fail with EPIPE: not our error.
    child.stdin.on('error', () => {});
    child.stdin.end(input ?? '');

    let killedFor: { reason: unknown } | { timeout: number } | undefined;
    let killTimer: ReturnType<typeof setTimeout> | undefined;
    const pid = child.pid;
    const killGroup = (): void => {
      if (pid === undefined || killTimer !== undefined) return;
      signalGroup(pid, 'SIGTERM');
      killTimer = setTimeout(() => signalGroup(pid, 'SIGKILL'), killGrace);
      killTimer.unref();
    };
    const onAbort = (): void => {
      killedFor ??= { reason: abortReason(signal) };
      killGroup();
    };
    const timer = Number.isFinite(timeout)
      ? setTimeout(() => {
          killedFor ??= { timeout };
          killGroup();
        }, timeout)
      : undefined;
    if (pid !== undefined) {
      liveGroups.add(pid);
      killLiveGroupsOnExit();
    }
    signal.addEventListener('abort', onAbort, { once: true });

    const settle = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (pid !== undefined) liveGroups.delete(pid);
    };
    child.once('error', (error) => {
      settle();
      clearTimeout(killTimer);
      reject(
        new AgentProcessError({
          command,
          args,
          exitCode: null,
          signal: null,
          stdout,
          stderr,
          reason: `could not be started (${error.message})`,
          cause: error,
        }),
      );
    });
    // The agent is done: what it started and left running in its group is ended too (it would
    // hold the child's stdout open, and outlive its rollout's endpoint).
    child.once('exit', killGroup);
    // `close`: the child exited and its stdout and stderr are read to the end.
    child.once('close', (exitCode, exitSignal) => {
      settle();
      if (killedFor !== undefined && 'reason' in killedFor) {
        reject(killedFor.reason);
        return;
      }
      if (exitCode === 0 && killedFor === undefined) {
        resolve({ exitCode, stdout, stderr, result: lastJsonObjectLine(stdout) as R | undefined });
        return;
      }
      reject(
        new AgentProcessError({
          command,
          args,
          exitCode,
          signal: exitSignal,
          stdout,
          stderr,
          reason:
            killedFor !== undefined
              ? `did not exit within its timeout of ${killedFor.timeout} ms and was killed`
              : undefined,
        }),
      );
    });
  });
}
