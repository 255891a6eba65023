/**
 * One service per data directory: a second service on the same directory would fail the first
 * one's running jobs as "interrupted by a restart". A lock file holds the owner's process id; a
 * lock left by a process that no longer exists (killed) is taken over.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Name of the lock file inside the data directory. */
export const LOCK_FILE = 'policyloop.lock';

/** Directories this process holds (a second `createApp` on one of them is refused too). */
const heldByThisProcess = new Set<string>();

/** A held lock; `release` removes it. */
export interface DataDirLock {
  release(): void;
}

/** Takes the lock of `dataDir` (an absolute path), or throws naming the process that holds it. */
export function lockDataDir(dataDir: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  if (heldByThisProcess.has(dataDir))
    throw new Error(
      `The data directory ${dataDir} is already used by another service in this process; close it first or use another dataDir`,
    );
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      writeFileSync(path, `${process.pid}\n`, { flag: 'wx' });
      heldByThisProcess.add(dataDir);
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          heldByThisProcess.delete(dataDir);
          rmSync(path, { force: true });
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (Number.isInteger(owner) && owner !== process.pid && isAlive(owner)) {
        throw new Error(
          `The data directory ${dataDir} is in use by process ${owner} (lock file ${path}); stop that service or use another data directory`,
        );
      }
      // The owner is gone (killed, crashed) or it was this process's own leftover: take over.
      rmSync(path, { force: true });
    }
  }
  throw new Error(`Could not take the lock file ${path}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
