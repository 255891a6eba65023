/**
 * The stdio transport of a command MCP server: newline-delimited JSON-RPC on the child's stdin and
 * stdout. It has the shape of the SDK's `Transport`, and exists beside the SDK's own
 * `StdioClientTransport` for what a training run needs that one does not do: the server runs in a
 * process group of its own, registered so that an interrupted script kills it (see
 * process-registry.ts), and closing kills the whole group, not only the process spawned; its
 * stderr is kept (the last lines) for the error that names a server that failed, instead of
 * being written to the script's console.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { groupAlive, signalGroup, trackGroup, untrackGroup } from './process-registry.js';

/** What to run. */
export interface ProcessParams {
  /** The command (a path, or a name looked up on `PATH`). */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** Its whole environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Its working directory. */
  readonly cwd?: string | undefined;
}

/** How the process ended. */
export interface ProcessExit {
  /** The exit code, when it exited. */
  readonly code: number | null;
  /** The signal that ended it, when one did. */
  readonly signal: NodeJS.Signals | null;
}

/** How much of the server's stderr is kept for messages. */
const STDERR_TAIL_CHARS = 4_000;
/** After stdin closes, the time a server gets to exit on its own before SIGTERM; then before SIGKILL. */
const GRACE_MS = 1_000;

function wait(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Waits until `done()` or `ms` passed, polling. */
async function waitUntil(done: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() >= end) return false;
    await wait(20);
  }
  return true;
}

/** One MCP server process, spoken to over its stdio. */
export class ProcessTransport {
  onmessage?: ((message: unknown) => void) | undefined;
  onerror?: ((error: Error) => void) | undefined;
  onclose?: (() => void) | undefined;

  private child: ChildProcess | undefined;
  private buffered = '';
  private stderrTail = '';
  private exitInfo: ProcessExit | undefined;
  private closing: Promise<void> | undefined;

  /**
   * @param params What to run.
   * @param parse Reads one line of stdout into a JSON-RPC message (throws for one that is not).
   */
  constructor(
    private readonly params: ProcessParams,
    private readonly parse: (line: string) => unknown,
  ) {}

  /** The process's pid, once spawned. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last of what the process wrote to stderr. */
  get stderr(): string {
    return this.stderrTail;
  }

  /** How the process ended, once it did. */
  get exit(): ProcessExit | undefined {
    return this.exitInfo;
  }

  /** Spawns the process; rejects when it cannot be (a command not found: `code` `ENOENT`). */
  start(): Promise<void> {
    if (this.child !== undefined) return Promise.reject(new Error('ProcessTransport already started'));
    const child = spawn(this.params.command, [...this.params.args], {
      env: { ...this.params.env },
      cwd: this.params.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Its own process group (POSIX), so that closing or an interrupted script kills all it started.
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    this.child = child;
    return new Promise<void>((resolve, reject) => {
      child.once('error', (error) => {
        // Only a failed spawn has no pid; later errors (a failed kill) go to onerror.
        if (child.pid === undefined) reject(error);
        else this.onerror?.(error);
      });
      child.once('spawn', () => {
        if (child.pid !== undefined) trackGroup(child.pid);
        resolve();
      });
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
      });
      child.once('close', () => {
        this.exitInfo ??= { code: child.exitCode, signal: child.signalCode };
        // The group may outlive its leader (a grandchild): forget it only once it is gone.
        const pid = child.pid;
        if (pid !== undefined && !groupAlive(pid)) untrackGroup(pid);
        this.onclose?.();
      });
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => this.read(chunk));
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_CHARS);
      });
      // A server that exits closes its stdin under us: an EPIPE is the exit, reported by onclose.
      child.stdin?.on('error', () => {});
    });
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    let newline = this.buffered.indexOf('\n');
    while (newline !== -1) {
      const line = this.buffered.slice(0, newline).replace(/\r$/, '');
      this.buffered = this.buffered.slice(newline + 1);
      newline = this.buffered.indexOf('\n');
      if (line.trim() === '') continue;
      let message: unknown;
      try {
        message = this.parse(line);
      } catch (error) {
        this.onerror?.(error instanceof Error ? error : new Error(String(error)));
        continue;
      }
      this.onmessage?.(message);
    }
  }

  /** Writes one message as a line of JSON. */
  send(message: unknown): Promise<void> {
    const stdin = this.child?.stdin;
    if (stdin == null || stdin.destroyed || this.exitInfo !== undefined) {
      return Promise.reject(new Error('Not connected: the server process is not running'));
    }
    // Written once buffered (not once flushed): waiting for the write's callback costs a turn of
    // the event loop per message; a full buffer waits for `drain`.
    if (stdin.write(`${JSON.stringify(message)}\n`)) return Promise.resolve();
    return new Promise<void>((resolve) => stdin.once('drain', resolve));
  }

  /**
   * Stops the server and everything in its process group: stdin closes (a well-behaved server
   * exits), then SIGTERM to the group after a grace period, then SIGKILL. Resolves once no process
   * of the group is left. Idempotent.
   */
  close(): Promise<void> {
    this.closing ??= this.terminate();
    return this.closing;
  }

  private async terminate(): Promise<void> {
    const child = this.child;
    const pid = child?.pid;
    if (child === undefined || pid === undefined) return;
    const exited = new Promise<void>((resolve) => {
      if (this.exitInfo !== undefined) resolve();
      else child.once('exit', () => resolve());
    });
    child.stdin?.end();
    // The leader's exit is an event (no polling); what it left in its group is polled.
    const gone = async (ms: number): Promise<boolean> => {
      const end = Date.now() + ms;
      const leader = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), ms);
        void exited.then(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      return leader && waitUntil(() => !groupAlive(pid), Math.max(0, end - Date.now()));
    };
    if (!(await gone(GRACE_MS))) {
      signalGroup(pid, 'SIGTERM');
      if (!(await gone(GRACE_MS))) {
        signalGroup(pid, 'SIGKILL');
        await gone(GRACE_MS);
      }
    }
    untrackGroup(pid);
    child.stdout?.destroy();
    child.stderr?.destroy();
  }
}
