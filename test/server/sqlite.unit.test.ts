/**
 * The store's SQLite seam (`src/server/sqlite.ts`) on this runtime's driver: `node:sqlite` on
 * Node 24 and later, better-sqlite3 on Node 20 and 22. CI runs the suite on both runtimes,
 * so both drivers pass these tests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, SQLITE_DRIVER, type SqliteDatabase } from '../../src/server/sqlite.js';

// better-sqlite3 is installed here, so Node 20 and 22 use it; Node 24 and later the built-in.
const expectedDriver = Number(process.versions.node.split('.')[0]) >= 24 ? 'node:sqlite' : 'better-sqlite3';

const opened: SqliteDatabase[] = [];
const directories: string[] = [];
afterEach(() => {
  for (const database of opened.splice(0)) database.close();
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function open(readonly = false, file?: string): { database: SqliteDatabase; file: string } {
  let path = file;
  if (path === undefined) {
    const directory = mkdtempSync(join(tmpdir(), 'policyloop-sqlite-'));
    directories.push(directory);
    path = join(directory, 'test.db');
  }
  const database = openDatabase(path, { readonly });
  opened.push(database);
  return { database, file: path };
}

describe('SQLite seam', () => {
  it(`runs on node:sqlite from Node 24, else better-sqlite3 (here: ${process.version})`, () => {
    const { database } = open();
    expect(SQLITE_DRIVER).toBe(expectedDriver);
    expect(database.driver).toBe(SQLITE_DRIVER);
  });

  it('binds positional and named values and reads rows back, undefined for no row', () => {
    const { database } = open();
    database.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, score REAL)');
    const insert = database.prepare('INSERT INTO t (name, score) VALUES (?, ?)');
    expect(insert.run('a', 0.5)).toEqual({ changes: 1, lastInsertRowid: 1 });
    insert.run('b', 1.5);
    expect(database.prepare('SELECT name, score FROM t WHERE id = @id').get({ id: 2 })).toEqual({
      name: 'b',
      score: 1.5,
    });
    expect(database.prepare('SELECT name FROM t ORDER BY id').all()).toEqual([{ name: 'a' }, { name: 'b' }]);
    expect(database.prepare('SELECT name FROM t WHERE id = ?').get(99)).toBeUndefined();
    expect(database.prepare('DELETE FROM t WHERE score > ?').run(1).changes).toBe(1);
  });

  it('prepares each SQL text once per connection', () => {
    const { database } = open();
    expect(database.prepare('SELECT 1 AS one')).toBe(database.prepare('SELECT 1 AS one'));
  });

  it('commits a transaction that returns and rolls back one that throws; a nested one is a savepoint', () => {
    const { database } = open();
    database.exec('CREATE TABLE t (value INTEGER)');
    const insert = database.prepare('INSERT INTO t VALUES (?)');
    const values = () =>
      (database.prepare('SELECT value FROM t ORDER BY value').all() as { value: number }[]).map((row) => row.value);
    const insertAll = database.transaction((batch: number[]) => {
      for (const value of batch) insert.run(value);
      return batch.length;
    });
    expect(insertAll([1, 2])).toBe(2);
    expect(() =>
      database.transaction(() => {
        insert.run(3);
        throw new Error('refused');
      })(),
    ).toThrow('refused');
    expect(values()).toEqual([1, 2]);
    database.transaction(() => {
      insert.run(4);
      expect(() =>
        database.transaction(() => {
          insert.run(5);
          throw new Error('inner refused');
        })(),
      ).toThrow('inner refused');
      insertAll([6]);
    })();
    expect(values()).toEqual([1, 2, 4, 6]);
  });

  it('reads pragmas and opens read-only connections that refuse writes', () => {
    const { database, file } = open();
    database.exec('PRAGMA journal_mode = WAL');
    database.exec('PRAGMA user_version = 7');
    database.exec('CREATE TABLE t (value INTEGER)');
    expect(database.pragmaValue('journal_mode')).toBe('wal');
    expect(Number(database.pragmaValue('user_version'))).toBe(7);
    const reader = open(true, file).database;
    expect(reader.prepare('SELECT COUNT(*) AS count FROM t').get()).toEqual({ count: 0 });
    expect(() => reader.exec('INSERT INTO t VALUES (1)')).toThrow(/readonly/);
  });
});
