/**
 * The store's one seam onto SQLite. Node 24 and later use Node's built-in `node:sqlite`: no native
 * build, and none of `better-sqlite3`'s garbage-collection hazard there (built against Node 24.19+
 * headers, its statements derive from a `node::ObjectWrap` whose destructor aborts the process when
 * the collector finalizes a statement outside a JavaScript context, as when a worker or the process
 * shuts down). Node 20 and 22 use the optional `better-sqlite3`; Node 22.13+ falls back to
 * `node:sqlite` when it is not installed (Node 22 still prints an ExperimentalWarning for it, which
 * is why it is not the first choice there).
 *
 * Prepared statements are cached per SQL text for the life of the connection: the store runs the
 * same few dozen statements over and over, and no statement is left for the collector to finalize
 * while the connection is open.
 */
import type BetterSqlite3 from 'better-sqlite3';

/** What running a write statement changed. */
export interface RunResult {
  readonly changes: number;
  readonly lastInsertRowid: number | bigint;
}

/** Values a statement binds: positional values, or one object of named values (`@name`). */
type Parameters = ReadonlyArray<unknown>;

/** A prepared statement, as both drivers run it. */
export interface SqliteStatement {
  /** Runs a write; returns what it changed. */
  run(...parameters: Parameters): RunResult;
  /** The first row, or `undefined` when there is none. */
  get(...parameters: Parameters): unknown;
  /** Every row. */
  all(...parameters: Parameters): unknown[];
}

/** Which SQLite binding a connection runs on. */
export type SqliteDriver = 'node:sqlite' | 'better-sqlite3';

/** A connection to one SQLite file. */
export interface SqliteDatabase {
  /** The binding this connection runs on. */
  readonly driver: SqliteDriver;
  /** The prepared statement for `sql`, prepared once per connection. */
  prepare(sql: string): SqliteStatement;
  /** Runs one or more statements that return nothing (migrations, pragmas that set). */
  exec(sql: string): void;
  /** The value of `PRAGMA name` (its first column of its first row). */
  pragmaValue(name: string): unknown;
  /**
   * Wraps `work` so that each call runs in one transaction: committed when it returns, rolled back
   * when it throws. A call inside another transaction becomes a savepoint of the outer one.
   */
  transaction<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T;
  /** Closes the connection; its statements are finalized with it. */
  close(): void;
}

interface NodeSqliteStatement {
  run(...parameters: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  get(...parameters: unknown[]): unknown;
  all(...parameters: unknown[]): unknown[];
}

interface NodeSqliteDatabase {
  prepare(sql: string): NodeSqliteStatement;
  exec(sql: string): void;
  close(): void;
}

interface NodeSqliteModule {
  DatabaseSync: new (path: string, options?: { timeout?: number; readOnly?: boolean }) => NodeSqliteDatabase;
}

/** `node:sqlite` when this runtime has it without a flag, else `undefined`. */
function builtinSqlite(): NodeSqliteModule | undefined {
  try {
    // getBuiltinModule (Node 20.16+, 22.3+) loads it synchronously and answers undefined when absent.
    const load = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
    const loaded = load?.call(process, 'node:sqlite') as Partial<NodeSqliteModule> | undefined;
    return typeof loaded?.DatabaseSync === 'function' ? (loaded as NodeSqliteModule) : undefined;
  } catch {
    return undefined;
  }
}

const NODE_MAJOR = Number(process.versions.node.split('.')[0]);

/** better-sqlite3, or undefined when it is not installed and `fallback` exists; else Node's error. */
async function betterSqlite(fallback: NodeSqliteModule | undefined): Promise<typeof BetterSqlite3 | undefined> {
  try {
    return (await import('better-sqlite3')).default;
  } catch (error) {
    // Without a fallback, Node's "Cannot find package 'better-sqlite3'" fails the local service's
    // import, and LocalBackend names the package to install.
    if (fallback === undefined) throw error;
    return undefined;
  }
}

const available = builtinSqlite();
const BetterSqlite = NODE_MAJOR >= 24 ? undefined : await betterSqlite(available);
const builtin = BetterSqlite === undefined ? available : undefined;

/** The binding {@link openDatabase} uses on this runtime. */
export const SQLITE_DRIVER: SqliteDriver = builtin === undefined ? 'better-sqlite3' : 'node:sqlite';

/** How {@link openDatabase} opens a file. */
export interface OpenDatabaseOptions {
  /** Open for reading only (the file must exist). Default false: read-write, created when needed. */
  readonly readonly?: boolean | undefined;
}

/**
 * Opens the SQLite file at `path` (read-write and created when needed, unless `readonly`). Waits
 * up to 5 s for a lock another connection holds (`busy_timeout`), on both drivers.
 */
export function openDatabase(path: string, options: OpenDatabaseOptions = {}): SqliteDatabase {
  const readonly = options.readonly ?? false;
  if (builtin !== undefined) {
    return new Connection('node:sqlite', new builtin.DatabaseSync(path, { timeout: 5000, readOnly: readonly }));
  }
  const database = new (BetterSqlite as typeof BetterSqlite3)(path, { timeout: 5000, readonly });
  return new Connection('better-sqlite3', database as unknown as NodeSqliteDatabase);
}

class Connection implements SqliteDatabase {
  private readonly statements = new Map<string, SqliteStatement>();
  private depth = 0;
  private savepoints = 0;

  constructor(
    readonly driver: SqliteDriver,
    private readonly database: NodeSqliteDatabase,
  ) {}

  prepare(sql: string): SqliteStatement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      const prepared = this.database.prepare(sql);
      statement = {
        run: (...parameters) => {
          const result = prepared.run(...parameters);
          return { changes: Number(result.changes), lastInsertRowid: result.lastInsertRowid };
        },
        get: (...parameters) => prepared.get(...parameters) ?? undefined,
        all: (...parameters) => prepared.all(...parameters),
      };
      this.statements.set(sql, statement);
    }
    return statement;
  }

  exec(sql: string): void {
    this.database.exec(sql);
  }

  pragmaValue(name: string): unknown {
    const row = this.database.prepare(`PRAGMA ${name}`).get() as Record<string, unknown> | undefined;
    return row === undefined ? undefined : Object.values(row)[0];
  }

  transaction<A extends unknown[], T>(work: (...args: A) => T): (...args: A) => T {
    return (...args) => {
      if (this.depth > 0) return this.nested(() => work(...args));
      this.database.exec('BEGIN');
      this.depth += 1;
      try {
        const result = work(...args);
        this.database.exec('COMMIT');
        return result;
      } catch (error) {
        rollBack(this.database, 'ROLLBACK');
        throw error;
      } finally {
        this.depth -= 1;
      }
    };
  }

  private nested<T>(work: () => T): T {
    this.savepoints += 1;
    const name = `policyloop_${this.savepoints}`;
    this.database.exec(`SAVEPOINT ${name}`);
    this.depth += 1;
    try {
      const result = work();
      this.database.exec(`RELEASE ${name}`);
      return result;
    } catch (error) {
      rollBack(this.database, `ROLLBACK TO ${name}`);
      rollBack(this.database, `RELEASE ${name}`);
      throw error;
    } finally {
      this.depth -= 1;
    }
  }

  close(): void {
    this.statements.clear();
    this.database.close();
  }
}

/**
 * Undoes a failed transaction. Some errors (a full disk, an interrupted statement) make SQLite roll
 * the transaction back itself; undoing it again would throw over the error that caused it.
 */
function rollBack(database: NodeSqliteDatabase, sql: string): void {
  try {
    database.exec(sql);
  } catch {
    // Already rolled back by SQLite: the caller rethrows the error that failed the transaction.
  }
}
