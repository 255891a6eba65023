/**
 * Every MCP server process this script started and has not yet seen gone, so that none outlives
 * it. Each server runs in a process group of its own (spawned `detached`), so that what it starts
 * in turn (`npx` starting `node`, a shell starting the server) is killed with it. While one is
 * alive, the registry listens for the script's exit and for SIGINT, SIGTERM and SIGHUP: it kills
 * the groups left, and when nobody else listens for the signal it raises it again, so that the
 * default behaviour (the script ends) is kept. The listeners are removed once no group is left.
 */

/** The signals after which no server may stay. */
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** The process groups (their leaders' pids) still alive, as far as we know. */
const groups = new Set<number>();
let listening = false;

/**
 * Sends `signal` to the process group led by `pid` (on Windows, where there are no groups, to the
 * process). Answers false when no process of the group is left.
 */
export function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(process.platform === 'win32' ? pid : -pid, signal);
    return true;
  } catch {
    return false; // ESRCH: the group is gone
  }
}

/** Whether any process of the group led by `pid` is still alive. */
export function groupAlive(pid: number): boolean {
  return signalGroup(pid, 0);
}

/** Kills every group left at once: what an exiting or interrupted script can still do. */
function killAll(): void {
  for (const pid of groups) signalGroup(pid, 'SIGKILL');
  groups.clear();
}

function onExit(): void {
  killAll();
}

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  stopListening();
  // Our listener kept Node from ending the script; with no other listener, end it as Node would.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function startListening(): void {
  if (listening) return;
  listening = true;
  process.on('exit', onExit);
  for (const signal of SIGNALS) process.on(signal, onSignal);
}

function stopListening(): void {
  if (!listening) return;
  listening = false;
  process.off('exit', onExit);
  for (const signal of SIGNALS) process.off(signal, onSignal);
}

/** Registers the group led by `pid` (a server just spawned). */
export function trackGroup(pid: number): void {
  groups.add(pid);
  startListening();
}

/** Forgets the group led by `pid` (it is gone). */
export function untrackGroup(pid: number): void {
  groups.delete(pid);
  if (groups.size === 0) stopListening();
}

/** How many server groups this script has alive (for tests and diagnostics). */
export function liveGroupCount(): number {
  return groups.size;
}
