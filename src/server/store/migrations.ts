/**
 * Schema migrations of the local service's SQLite store, applied in order by the `user_version`
 * pragma: migration `i` moves a database from version `i` to `i + 1`. Only ever append.
 */
export const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE models (
    id TEXT PRIMARY KEY,
    entity TEXT NOT NULL,
    project TEXT NOT NULL,
    name TEXT NOT NULL,
    base_model TEXT NOT NULL,
    latest_step INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (entity, project, name)
  );
  CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    path TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (model_id, step)
  );
  CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    progress REAL,
    num_sequences INTEGER,
    steps_done INTEGER NOT NULL DEFAULT 0,
    error_message TEXT,
    request TEXT NOT NULL,
    output_path TEXT,
    training_start TEXT,
    training_end TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  CREATE INDEX jobs_by_model ON jobs (model_id);
  CREATE INDEX jobs_by_status ON jobs (status);
  CREATE TABLE job_events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX job_events_by_job ON job_events (job_id, sequence);
  CREATE TABLE trajectory_groups (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    split TEXT NOT NULL,
    step INTEGER NOT NULL,
    data TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX trajectory_groups_by_model ON trajectory_groups (model_id, split, step);
  CREATE TABLE step_metrics (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    model_id TEXT NOT NULL REFERENCES models(id) ON DELETE CASCADE,
    split TEXT NOT NULL,
    step INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    created_at TEXT NOT NULL
  );
  CREATE INDEX step_metrics_by_model ON step_metrics (model_id, split, step);
  `,
  // Idempotency-Key answers: one row per (caller, key), written in the same transaction as the
  // write it answers, so neither can exist without the other. `principal` is a SHA-256 of the
  // caller's API key (never the key itself); `request_hash` covers method, path and the body.
  `
  CREATE TABLE idempotency_keys (
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    status INTEGER NOT NULL,
    response_body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (principal, key)
  );
  CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
  `,
  // The local read routes (`/v1/local/`): metrics paged by step then split, and logged groups
  // filtered by step alone.
  `
  CREATE INDEX step_metrics_by_step ON step_metrics (model_id, step, split);
  CREATE INDEX trajectory_groups_by_step ON trajectory_groups (model_id, step);
  `,
  // The weight of each mean in a log route's metrics row (JSON, null for rows written otherwise):
  // groups of one step logged in several requests merge into the metrics of all of them.
  `
  ALTER TABLE step_metrics ADD COLUMN weights TEXT;
  `,
];
