/**
 * What every table module of the store shares: the one SQLite connection, opened with the store's
 * pragmas and its schema brought up to date, and the one transaction helper they all write
 * through; plus the clock and the page shape their answers use.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS } from './migrations.js';
import { openDatabase, type SqliteDatabase, type SqliteStatement } from '../sqlite.js';

/** Name of the database file inside the data directory. */
export const DATABASE_FILE = 'policyloop.db';

/** One page of items and whether more follow. `undefined` from a list call means an unknown cursor. */
export interface StorePage<T> {
  readonly items: T[];
  readonly hasMore: boolean;
}

/** The time a row is written, as an ISO 8601 string. */
export function now(): string {
  return new Date().toISOString();
}

/**
 * The store's connection to `<dataDir>/policyloop.db` (through `../sqlite.ts`: `node:sqlite` where
 * the runtime has it, else better-sqlite3). All calls are synchronous and therefore never
 * interleave. WAL with `synchronous=FULL`, so a write acknowledged to a client survives `kill -9`
 * of the process.
 */
export class StoreConnection {
  private readonly db: SqliteDatabase;
  private open = true;

  private constructor(db: SqliteDatabase) {
    this.db = db;
  }

  /** Opens (creating when needed) the database in `dataDir` and brings its schema up to date. */
  static openIn(dataDir: string): StoreConnection {
    mkdirSync(dataDir, { recursive: true });
    const db = openDatabase(join(dataDir, DATABASE_FILE));
    try {
      db.exec('PRAGMA journal_mode = WAL');
      // FULL: every commit is fsynced, so a 200 answer means the write is on disk.
      db.exec('PRAGMA synchronous = FULL');
      db.exec('PRAGMA foreign_keys = ON');
      db.exec('PRAGMA busy_timeout = 5000');
      migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }
    return new StoreConnection(db);
  }

  /** True until {@link close}. */
  get isOpen(): boolean {
    return this.open;
  }

  /** The prepared statement for `sql` (prepared once per connection). Throws once closed. */
  prepare(sql: string): SqliteStatement {
    return this.db.prepare(sql);
  }

  /**
   * Runs `work` in one transaction: all of its writes are stored, or none (it throws). A
   * transaction opened inside it (by another table module, or the caller's) becomes part of it.
   */
  transaction<T>(work: () => T): T {
    return this.db.transaction(work)();
  }

  /** Closes the database; later calls throw. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.db.close();
  }
}

function migrate(db: SqliteDatabase): void {
  const version = Number(db.pragmaValue('user_version'));
  if (version > MIGRATIONS.length) {
    throw new Error(
      `The store's schema version is ${version}, newer than this policyloop knows (${MIGRATIONS.length}); upgrade policyloop or use another data directory.`,
    );
  }
  for (let index = version; index < MIGRATIONS.length; index += 1) {
    const migration = MIGRATIONS[index] as string;
    db.transaction(() => {
      db.exec(migration);
      db.exec(`PRAGMA user_version = ${index + 1}`);
    })();
  }
}
