/**
 * One service per data directory: a second service on the same directory would fail the first
 * one's running jobs as "interrupted by a restart". The lock file holds the owner's process id, its
 * start time (Linux) and a random token. It is taken atomically: the content is written to a
 * private file first, then hard-linked to the lock's name, which fails if the name exists, so
 * nobody ever sees a half-written lock. Only the owner's token releases it. A lock whose process is
 * gone (killed, crashed, or a zombie not yet reaped) is taken over with a rename that only one
 * contender can win.
 */
import { randomBytes } from 'node:crypto';
import { linkSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Name of the lock file inside the data directory. */
export const LOCK_FILE = 'policyloop.lock';

/**
 * How long a lock file whose content cannot be read as `pid start token` (one written by an older
 * version, which created the file and wrote the pid in two steps) is taken to be still being
 * written; an older one is stale.
 */
const UNREADABLE_LOCK_GRACE_MS = 10_000;

/** Directories this process holds (a second `createApp` on one of them is refused too). */
const heldByThisProcess = new Set<string>();
/** Tokens of the locks this process holds (the same directory may be reached by another path). */
const tokensOfThisProcess = new Set<string>();

/** A held lock; `release` removes it if it is still this holder's. */
export interface DataDirLock {
  release(): void;
}

interface LockOwner {
  readonly pid: number;
  /** Start time of the process (field 22 of `/proc/PID/stat`), or '-' where unknown. */
  readonly start: string;
  readonly token: string;
}

/** Takes the lock of `dataDir` (an absolute path), or throws naming the process that holds it. */
export function lockDataDir(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  if (heldByThisProcess.has(dataDir))
    throw new Error(
      `The data directory ${dataDir} is already used by another service in this process; close it first or use another dataDir`,
    );
  const token = randomBytes(16).toString('hex');
  const content = `${process.pid} ${processStartTime(process.pid) ?? '-'} ${token}\n`;
  const draft = `${path}.${process.pid}.${token}.tmp`;
  writeFileSync(draft, content, { flag: 'wx', mode: 0o644 });
  try {
    // A few rounds: each lost takeover race reads the lock again.
    for (let attempt = 0; attempt < 5; attempt += 1) {
      try {
        linkSync(draft, path);
        heldByThisProcess.add(dataDir);
        tokensOfThisProcess.add(token);
        removeLeftovers(dataDir);
        return ownLock(dataDir, path, token);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const current = readLock(path);
      if (current === undefined) continue; // removed meanwhile: try again
      const owner = parseOwner(current.text);
      if (owner === undefined) {
        if (Date.now() - current.mtimeMs < UNREADABLE_LOCK_GRACE_MS)
          throw new Error(
            `The data directory ${dataDir} is being locked by another process (lock file ${path} is not complete yet); stop that service or use another data directory`,
          );
      } else if (owner.pid === process.pid ? tokensOfThisProcess.has(owner.token) : isRunning(owner)) {
        throw new Error(
          `The data directory ${dataDir} is in use by process ${owner.pid} (lock file ${path}); stop that service or use another data directory`,
        );
      }
      // The owner is gone (killed, crashed, a zombie) or the lock is a leftover of an earlier
      // process with this pid: take it over, unless someone else did first.
      takeOver(path, current.text, token);
    }
    throw new Error(`Could not take the lock file ${path}: other processes keep taking it over`);
  } finally {
    rmSync(draft, { force: true });
  }
}

function ownLock(dataDir: string, path: string, token: string): DataDirLock {
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      heldByThisProcess.delete(dataDir);
      tokensOfThisProcess.delete(token);
      // Only our own lock: one that another process took over (after this one was thought dead) stays.
      const current = readLock(path);
      if (current !== undefined && token !== '' && parseOwner(current.text)?.token === token)
        rmSync(path, { force: true });
    },
  };
}

/**
 * Removes the stale lock whose content is `staleText`. The rename is atomic, so of several
 * contenders only one moves the stale file; one that moved a fresh lock instead (taken in between)
 * puts it back.
 */
function takeOver(path: string, staleText: string, token: string): void {
  const aside = `${path}.${process.pid}.${token}.stale`;
  try {
    renameSync(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  try {
    const moved = readFileSync(aside, 'utf8');
    if (moved !== staleText) {
      try {
        linkSync(aside, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
    }
  } finally {
    rmSync(aside, { force: true });
  }
}

/** Drafts and set-aside locks of processes that died between writing and removing them. */
function removeLeftovers(dataDir: string): void {
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch {
    return;
  }
  for (const name of names) {
    const match = /^policyloop\.lock\.(\d+)\.[0-9a-f]{32}\.(tmp|stale)$/.exec(name);
    if (match === null) continue;
    const pid = Number(match[1]);
    if (pid !== process.pid && !isRunning({ pid, start: '-', token: '' })) rmSync(join(dataDir, name), { force: true });
  }
}

function readLock(path: string): { text: string; mtimeMs: number } | undefined {
  try {
    const { mtimeMs } = statSync(path);
    return { text: readFileSync(path, 'utf8'), mtimeMs };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

function parseOwner(text: string): LockOwner | undefined {
  // An older version's lock holds the pid alone.
  const legacy = /^(\d+)\n$/.exec(text);
  if (legacy !== null) return { pid: Number(legacy[1]), start: '-', token: '' };
  const match = /^(\d+) (\d+|-) ([0-9a-f]{32})\n$/.exec(text);
  if (match === null) return undefined;
  return { pid: Number(match[1]), start: match[2] as string, token: match[3] as string };
}

/** Whether the lock's owner still runs: it exists, is not a zombie and is not a later process given the same pid. */
function isRunning(owner: LockOwner): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = procStat(owner.pid);
  if (stat === undefined) return true; // no /proc: trust the signal
  if (stat.state === 'Z' || stat.state === 'X') return false;
  return owner.start === '-' || stat.start === owner.start;
}

function processStartTime(pid: number): string | undefined {
  return procStat(pid)?.start;
}

/** State and start time from `/proc/PID/stat` (Linux); undefined elsewhere or when unreadable. */
function procStat(pid: number): { state: string; start: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // `pid (comm) state ...`: comm may hold spaces and parentheses, so split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const start = fields[19];
  if (state === undefined || start === undefined || !/^\d+$/.test(start)) return undefined;
  return { state, start };
}
