/**
 * Test support: SkyRL 0.4.0's Tinker server, for real, on the CPU and on loopback, plus the
 * official `tinker` 0.25.0 SDK as a reference client (test/tinker/sdk_reference.py).
 *
 * - {@link skyrlSkipReason} says whether the Tinker suite can run here: it needs a Python >= 3.12
 *   and < 3.15 (skyrl's range) and, while the venv is not built yet, a package index.
 *   `POLICYLOOP_REQUIRE_TINKER=1` (CI) turns a reason to skip into an error.
 * - {@link ensureSkyrlVenv} builds `.cache/skyrl-venv` from test/tinker/requirements.txt with uv
 *   (rebuilt when the file's hash changes; `POLICYLOOP_SKYRL_VENV` puts it elsewhere).
 * - {@link startSkyrlServer} starts `uv run ... python -m skyrl.tinker.api` on a model folder with
 *   its own SQLite database and checkpoint folder, and resolves once the engine has answered a real
 *   sample; {@link SkyrlServer.kill} and {@link SkyrlServer.restart} crash and restart it on the
 *   same port and state, {@link SkyrlServer.close} ends its whole process group.
 * - {@link runSdkReference} runs the SDK script against a server.
 *
 * The recipe (uv run, JAX_PLATFORMS=cpu, HF_HUB_OFFLINE=1) is the one measured in
 * shared/data/tinker/README.md. The API server starts the engine as a child process (`uv run -m
 * skyrl.tinker.engine`, from its own command line); both stay in the process group of the
 * outer `uv`, which is why the group is what gets signalled.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ensureVenv,
  type EnsuredVenv,
  findPython,
  type FoundPython,
  packageIndexProblem,
  runCommand,
  venvBin,
  venvIsCurrent,
  venvPython,
} from './python-venv.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The pinned Python packages of the Tinker suite. */
export const SKYRL_REQUIREMENTS = path.join(ROOT, 'test', 'tinker', 'requirements.txt');
/** The official-SDK reference script (JSON in on stdin, JSON out on stdout). */
export const SDK_REFERENCE_SCRIPT = path.join(ROOT, 'test', 'tinker', 'sdk_reference.py');
/** Whether a missing Python or package index fails the suite instead of skipping it (CI sets it). */
export const TINKER_REQUIRED = process.env['POLICYLOOP_REQUIRE_TINKER'] === '1';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const LOG_LIMIT = 2_000_000;

/** The venv's folder: `POLICYLOOP_SKYRL_VENV`, else `.cache/skyrl-venv` in the repo. */
export function skyrlVenvDir(): string {
  const fromEnv = process.env['POLICYLOOP_SKYRL_VENV'];
  return fromEnv !== undefined && fromEnv !== '' ? path.resolve(fromEnv) : path.join(ROOT, '.cache', 'skyrl-venv');
}

let foundPython: FoundPython | { reason: string } | undefined;
function skyrlPython(): FoundPython | { reason: string } {
  foundPython ??= findPython({
    min: [3, 12],
    below: [3, 15],
    envVar: 'POLICYLOOP_SKYRL_PYTHON',
    purpose: 'skyrl 0.4.0',
  });
  return foundPython;
}

/**
 * Whether SkyRL can run here: the interpreter the venv is (or will be) built from, or why not (no
 * Python in range; the venv must be built and no package index answers).
 *
 * @example
 * const available = await skyrlAvailable();
 * if (!available.available) console.log(available.reason);
 */
export async function skyrlAvailable(): Promise<
  { available: true; python: FoundPython } | { available: false; reason: string }
> {
  const python = skyrlPython();
  if ('reason' in python) return { available: false, reason: python.reason };
  if (!venvIsCurrent(skyrlVenvDir(), SKYRL_REQUIREMENTS, python)) {
    const problem = await packageIndexProblem('skyrl');
    if (problem !== undefined) return { available: false, reason: problem };
  }
  return { available: true, python };
}

/**
 * Why the Tinker suite must skip here, or `undefined` when it can run. With
 * `POLICYLOOP_REQUIRE_TINKER=1` a reason is thrown instead, so CI fails rather than skips.
 *
 * @example
 * const skipReason = await skyrlSkipReason();
 * describe.skipIf(skipReason !== undefined)('against SkyRL', () => { ... });
 */
export async function skyrlSkipReason(): Promise<string | undefined> {
  // CI runs the server tests in its machine-Node leg only (.ci/run): they take minutes and a 2.4 GB server.
  if (process.env['POLICYLOOP_TINKER_SERVER'] === 'off')
    return 'POLICYLOOP_TINKER_SERVER=off (CI runs the SkyRL server tests in its machine-Node leg only)';
  const available = await skyrlAvailable();
  if (available.available) return undefined;
  if (TINKER_REQUIRED)
    throw new Error(`POLICYLOOP_REQUIRE_TINKER=1 but the Tinker suite cannot run: ${available.reason}`);
  return available.reason;
}

/**
 * Builds the SkyRL venv unless it is current (see test/support/python-venv.ts): ~10-30 s from a
 * warm uv cache, minutes and ~6 GB of downloads from a cold one.
 */
export async function ensureSkyrlVenv(
  options: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined } = {},
): Promise<EnsuredVenv & { venv: string }> {
  const python = skyrlPython();
  if ('reason' in python) throw new Error(`Expected a Python for the SkyRL venv: ${python.reason}`);
  const venv = skyrlVenvDir();
  const ensured = await ensureVenv({
    python,
    venv,
    requirements: SKYRL_REQUIREMENTS,
    useUv: true,
    timeoutMs: options.timeoutMs ?? 30 * MINUTE,
    signal: options.signal,
  });
  return { ...ensured, venv };
}

/** How {@link startSkyrlServer} runs the server. */
export interface SkyrlServerOptions {
  /** The model folder (for example from `writeTinyQwen3`); its path is the base model id SkyRL serves. */
  readonly modelDir: string;
  /** The loopback port. @default a free port */
  readonly port?: number | undefined;
  /** `max_lora_rank` of the JAX backend: the largest rank a model may ask for. @default 8 */
  readonly maxLoraRank?: number | undefined;
  /** `max_lora_adapters`: how many training models may be loaded at once. @default 4 */
  readonly maxLoraAdapters?: number | undefined;
  /** More `--backend-config` keys (for example `train_micro_batch_size`). @default {} */
  readonly backendConfig?: Readonly<Record<string, unknown>> | undefined;
  /** More arguments for `skyrl.tinker.api` (for example `['--session-timeout-sec', '60']`). @default [] */
  readonly extraArgs?: readonly string[] | undefined;
  /**
   * The folder of the server's state: `tinker.db` (SQLite) and `checkpoints/`. A given folder is
   * kept by {@link SkyrlServer.close}. @default a new temporary folder, removed by close()
   */
  readonly stateDir?: string | undefined;
  /** How long to wait for the engine to be ready (per start and restart). @default 240 s */
  readonly readyTimeoutMs?: number | undefined;
  /** Aborts the start (the process group is then ended). */
  readonly signal?: AbortSignal | undefined;
}

/** One process of the server's group, from /proc. */
export interface SkyrlProcess {
  readonly pid: number;
  /** Resident memory, bytes. */
  readonly rssBytes: number;
  /** The command line, arguments joined by spaces. */
  readonly command: string;
}

/** How long a start took, seconds from the spawn. */
export interface SkyrlStartup {
  /** Until `/api/v1/healthz` answered 200. */
  readonly healthSeconds: number;
  /** Until the engine had answered the readiness sample (the server is usable). */
  readonly readySeconds: number;
}

/** A running SkyRL Tinker server (see {@link startSkyrlServer}). */
export interface SkyrlServer {
  /** `http://127.0.0.1:PORT`; the Tinker routes are under `${baseURL}/api/v1/`. */
  readonly baseURL: string;
  /** The served model folder, which is also the base model's name on this server. */
  readonly modelDir: string;
  /** The state folder: `tinker.db` and `checkpoints/`. */
  readonly stateDir: string;
  /** The SQLite file (`--database-url sqlite:///...`). */
  readonly databaseFile: string;
  /** The checkpoints folder (`--checkpoints-base`). */
  readonly checkpointsDir: string;
  /** The last start's (or restart's) timings. */
  readonly startup: SkyrlStartup;
  /** Whether the server's process group is up (false after kill() or close(), or a crash). */
  readonly running: boolean;
  /** Everything the server and its engine printed, restarts included (the last 2 MB). */
  logs(): string;
  /** The processes of the group now (outer uv, API server, inner uv, engine). */
  processes(): SkyrlProcess[];
  /** Ends the group at once with SIGKILL, as a crash would; the port and state are kept for restart(). */
  kill(): Promise<void>;
  /**
   * Kills the server if it runs, starts it again on the same port and state, and waits until ready.
   *
   * What SkyRL 0.4.0 keeps across it (measured): the database (sessions, which still take
   * heartbeats; model records, which `get_info` still calls "created"; futures, whose finished
   * results can still be retrieved; checkpoint records, listed by `training_runs/{id}/checkpoints`)
   * and the checkpoint files. What it loses: the loaded models. Every request on a model id from
   * before, a future left pending by the crash included, fails with 400 `{"detail": "Model <id>
   * not loaded (likely stale request from previous server)"}`, and so does sampling from that
   * model's sampler checkpoints; re-sending a training call with its old `seq_id` returns the old
   * (failed) future. To resume, create a new model from a `save_weights` checkpoint
   * (`load_weights`, with or without the optimizer state): the next step then equals the
   * uninterrupted one exactly.
   */
  restart(options?: { signal?: AbortSignal | undefined }): Promise<SkyrlStartup>;
  /**
   * Ends the group (SIGTERM, then SIGKILL after 15 s), checks that none of its processes is left,
   * and removes the state folder if it was a temporary one. Safe to call twice.
   */
  close(): Promise<void>;
}

/** The live (not zombie) processes whose process group is `group`, from /proc (Linux). */
function groupProcesses(group: number): SkyrlProcess[] {
  if (process.platform !== 'linux') {
    try {
      process.kill(-group, 0);
      return [{ pid: group, rssBytes: 0, command: '(process group members; /proc is Linux only)' }];
    } catch {
      return [];
    }
  }
  const found: SkyrlProcess[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Fields after the command, which is in parentheses and may hold spaces: state ppid pgrp ...
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) !== group || fields[0] === 'Z' || fields[0] === 'X') continue;
      const rss = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${entry}/status`, 'utf8'));
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim();
      found.push({ pid: Number(entry), rssBytes: rss === null ? 0 : Number(rss[1]) * 1024, command });
    } catch {
      // The process ended while being read.
    }
  }
  return found;
}

function signalGroup(group: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-group, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Waits until the group has no live process; false if some are left after `timeoutMs`. */
async function groupGone(group: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (groupProcesses(group).length === 0) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A free loopback port (the OS picks one; it is free again when this resolves). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

class ServerProcess implements SkyrlServer {
  readonly baseURL: string;
  readonly databaseFile: string;
  readonly checkpointsDir: string;
  startup: SkyrlStartup = { healthSeconds: 0, readySeconds: 0 };
  #child: ChildProcess | undefined;
  #group: number | undefined;
  #exit: Promise<string> | undefined;
  #log: string[] = [];
  #logLength = 0;
  #closed = false;
  readonly #onProcessExit = () => {
    if (this.#group !== undefined) signalGroup(this.#group, 'SIGKILL');
  };

  constructor(
    readonly modelDir: string,
    readonly stateDir: string,
    private readonly port: number,
    private readonly venv: string,
    private readonly options: SkyrlServerOptions,
    private readonly ownsState: boolean,
  ) {
    this.baseURL = `http://127.0.0.1:${port}`;
    this.databaseFile = path.join(stateDir, 'tinker.db');
    this.checkpointsDir = path.join(stateDir, 'checkpoints');
  }

  get running(): boolean {
    return this.#group !== undefined && groupProcesses(this.#group).length > 0;
  }

  logs(): string {
    return this.#log.join('');
  }

  processes(): SkyrlProcess[] {
    return this.#group === undefined ? [] : groupProcesses(this.#group);
  }

  #append(text: string): void {
    this.#log.push(text);
    this.#logLength += text.length;
    while (this.#logLength > LOG_LIMIT && this.#log.length > 1) this.#logLength -= this.#log.shift()?.length ?? 0;
  }

  #logTail(): string {
    return this.logs().slice(-6000);
  }

  /** Spawns the server and waits until the engine answers; ends the group if that fails. */
  async start(signal: AbortSignal | undefined): Promise<SkyrlStartup> {
    if (this.#closed) throw new Error('Expected an open SkyRL server; close() was called');
    const python = venvPython(this.venv);
    const backendConfig = {
      max_lora_adapters: this.options.maxLoraAdapters ?? 4,
      max_lora_rank: this.options.maxLoraRank ?? 8,
      ...this.options.backendConfig,
    };
    const args = [
      'run',
      '--no-project',
      '--python',
      python,
      'python',
      '-m',
      'skyrl.tinker.api',
      '--base-model',
      this.modelDir,
      '--backend',
      'jax',
      '--backend-config',
      JSON.stringify(backendConfig),
      '--database-url',
      `sqlite:///${this.databaseFile}`,
      '--checkpoints-base',
      this.checkpointsDir,
      '--host',
      '127.0.0.1',
      '--port',
      String(this.port),
      ...(this.options.extraArgs ?? []),
    ];
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      // The API server runs `uv` by name to start its engine.
      PATH: `${venvBin(this.venv)}${path.delimiter}${process.env['PATH'] ?? ''}`,
      JAX_PLATFORMS: 'cpu',
      HF_HUB_OFFLINE: '1',
      // `uv run --no-project` syncs nothing; offline it cannot start a download either.
      UV_OFFLINE: '1',
      PYTHONUNBUFFERED: '1',
    };
    delete env['VIRTUAL_ENV'];
    this.#append(`---- policyloop: starting uv ${args.join(' ')}\n`);
    const started = Date.now();
    // detached: the outer uv leads a new process group, which the API server and engine join.
    const child = spawn(path.join(venvBin(this.venv), 'uv'), args, {
      cwd: this.stateDir,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    this.#group = child.pid;
    process.on('exit', this.#onProcessExit);
    child.stdout?.on('data', (chunk: Buffer) => this.#append(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => this.#append(chunk.toString()));
    this.#exit = new Promise((resolve) => {
      child.once('error', (error) => resolve(`failed to start: ${error.message}`));
      child.once('exit', (code, exitSignal) => resolve(`exited with ${exitSignal ?? `code ${code}`}`));
    });
    const timeoutMs = this.options.readyTimeoutMs ?? 4 * MINUTE;
    const deadline = AbortSignal.timeout(timeoutMs);
    const waitSignal = signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
    try {
      const healthSeconds = await this.#waitFor(waitSignal, () => this.#healthy(), started);
      const readySeconds = await this.#waitFor(waitSignal, () => this.#engineAnswers(waitSignal), started);
      this.startup = { healthSeconds, readySeconds };
      return this.startup;
    } catch (error) {
      await this.#endGroup('SIGKILL');
      const why = signal?.aborted
        ? 'the start was aborted'
        : deadline.aborted
          ? `it was not ready within ${timeoutMs / SECOND} s`
          : error instanceof Error
            ? error.message
            : String(error);
      throw new Error(
        `Expected SkyRL's Tinker server on ${this.baseURL} to become ready; ${why}. Log tail:\n${this.#logTail()}`,
        { cause: error },
      );
    }
  }

  /** Runs `step` until it resolves, racing the process's exit; resolves to the seconds since `started`. */
  async #waitFor(signal: AbortSignal, step: () => Promise<boolean>, started: number): Promise<number> {
    const exited = this.#exit ?? Promise.resolve('was not started');
    for (;;) {
      signal.throwIfAborted();
      const outcome = await Promise.race([
        step().catch(() => false),
        exited.then((how) => {
          throw new Error(`the server ${how}`);
        }),
      ]);
      if (outcome) return (Date.now() - started) / SECOND;
      await sleep(250, signal);
    }
  }

  async #healthy(): Promise<boolean> {
    const response = await fetch(`${this.baseURL}/api/v1/healthz`, { signal: AbortSignal.timeout(5 * SECOND) });
    await response.body?.cancel();
    return response.ok;
  }

  async #post(route: string, body: unknown, signal: AbortSignal, timeoutMs = 30 * SECOND): Promise<Response> {
    return fetch(`${this.baseURL}/api/v1/${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'tml-policyloop-readiness' },
      body: JSON.stringify(body),
      signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
    });
  }

  async #json<T>(route: string, body: unknown, signal: AbortSignal): Promise<T> {
    const response = await this.#post(route, body, signal);
    const text = await response.text();
    if (!response.ok) throw new Error(`${route} answered ${response.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text) as T;
  }

  /**
   * The readiness probe: /healthz answers as soon as the API is up, but the engine (a separate
   * process) loads the model and starts taking requests ~30 s later. A one-token sample on the
   * base model, followed to its result, proves the engine works; it uses no LoRA slot.
   */
  async #engineAnswers(signal: AbortSignal): Promise<boolean> {
    const { session_id } = await this.#json<{ session_id: string }>(
      'create_session',
      { tags: ['policyloop-readiness'], user_metadata: {}, sdk_version: '0.25.0', type: 'create_session' },
      signal,
    );
    const { sampling_session_id } = await this.#json<{ sampling_session_id: string }>(
      'create_sampling_session',
      { session_id, sampling_session_seq_id: 0, base_model: this.modelDir, type: 'create_sampling_session' },
      signal,
    );
    const { request_id } = await this.#json<{ request_id: string }>(
      'asample',
      {
        num_samples: 1,
        prompt: { chunks: [{ tokens: [9707], type: 'encoded_text' }] },
        sampling_params: { max_tokens: 1, seed: 0, temperature: 1, top_k: -1, top_p: 1 },
        sampling_session_id,
        seq_id: 0,
        prompt_logprobs: false,
        topk_prompt_logprobs: 0,
        type: 'sample',
      },
      signal,
    );
    for (;;) {
      signal.throwIfAborted();
      let response: Response;
      try {
        // SkyRL holds retrieve_future open up to 300 s; poll again every 45 s as the SDK does.
        response = await this.#post('retrieve_future', { request_id, allow_metadata_only: true }, signal, 45 * SECOND);
      } catch (error) {
        if (signal.aborted) throw error;
        continue;
      }
      const body = Buffer.from(await response.arrayBuffer());
      if (response.status === 408 || response.status >= 500) continue;
      const text = body.toString('utf8');
      if (response.status === 200 && text.includes('"try_again"')) continue;
      if (response.status === 200) return true;
      throw new Error(
        `the readiness sample failed: retrieve_future answered ${response.status}: ${text.slice(0, 500)}`,
      );
    }
  }

  /** Signals the group, waits for it to be gone (SIGKILL after 15 s), and checks that it is. */
  async #endGroup(signal: NodeJS.Signals): Promise<void> {
    const group = this.#group;
    if (group === undefined) return;
    signalGroup(group, signal);
    if (!(await groupGone(group, 15 * SECOND))) {
      signalGroup(group, 'SIGKILL');
      await groupGone(group, 5 * SECOND);
    }
    const left = groupProcesses(group);
    // The outer uv is our child: wait for its exit so it is reaped (no zombie left behind).
    if (this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null)
      await Promise.race([this.#exit, new Promise((resolve) => setTimeout(resolve, 5 * SECOND))]);
    this.#child = undefined;
    this.#group = undefined;
    process.off('exit', this.#onProcessExit);
    if (left.length > 0)
      throw new Error(
        `Expected SkyRL's process group ${group} to end; still running: ${left.map((entry) => `${entry.pid} ${entry.command}`).join('; ')}`,
      );
  }

  async kill(): Promise<void> {
    this.#append('---- policyloop: kill (SIGKILL to the process group)\n');
    await this.#endGroup('SIGKILL');
  }

  async restart(options: { signal?: AbortSignal | undefined } = {}): Promise<SkyrlStartup> {
    if (this.#group !== undefined) await this.kill();
    this.#append('---- policyloop: restart on the same port and state\n');
    return this.start(options.signal);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#endGroup('SIGTERM');
    } finally {
      if (this.ownsState) await rm(this.stateDir, { recursive: true, force: true });
    }
  }
}

/**
 * Starts SkyRL's Tinker server (JAX backend, CPU) on `127.0.0.1` for `modelDir`, building the venv
 * first if needed, and resolves once the engine has answered a one-token sample on the base model
 * (~40 s on 2 cores; `/healthz` alone answers ~30 s before the engine can). On failure the group
 * is ended and the error holds the log's tail.
 *
 * @example
 * const model = await writeTinyQwen3(await mkdtemp(path.join(os.tmpdir(), 'tiny-qwen3-')));
 * const server = await startSkyrlServer({ modelDir: model });
 * try {
 *   // TINKER_BASE_URL=server.baseURL ...
 * } finally {
 *   await server.close();
 * }
 */
export async function startSkyrlServer(options: SkyrlServerOptions): Promise<SkyrlServer> {
  const modelDir = path.resolve(options.modelDir);
  if (!existsSync(path.join(modelDir, 'config.json')))
    throw new Error(`Expected a model folder with config.json at ${modelDir}; found none`);
  const { venv } = await ensureSkyrlVenv({ signal: options.signal });
  const ownsState = options.stateDir === undefined;
  const stateDir =
    options.stateDir === undefined
      ? await mkdtemp(path.join(os.tmpdir(), 'policyloop-skyrl-'))
      : path.resolve(options.stateDir);
  await mkdir(path.join(stateDir, 'checkpoints'), { recursive: true });
  const port = options.port ?? (await freePort());
  const server = new ServerProcess(modelDir, stateDir, port, venv, options, ownsState);
  try {
    await server.start(options.signal);
  } catch (error) {
    if (ownsState) await rm(stateDir, { recursive: true, force: true });
    throw error;
  }
  return server;
}

/** Input of sdk_reference.py's `logprobs` mode (see the script's docstring). */
export interface SdkLogprobsInput {
  readonly mode: 'logprobs';
  /** The sampler weights to read (`tinker://model_id/name`); else `baseModel`. */
  readonly modelPath?: string | undefined;
  /** The base model (the served folder). @default the server's modelDir */
  readonly baseModel?: string | undefined;
  readonly items: readonly { readonly promptTokens: readonly number[]; readonly completionTokens: readonly number[] }[];
  /** `sampler`: SamplingClient.compute_logprobs; `training`: a fresh LoRA model's forward. @default 'sampler' */
  readonly via?: 'sampler' | 'training' | undefined;
  /** LoRA rank of the `training` way's model. @default 8 */
  readonly rank?: number | undefined;
}

/** Output of the `logprobs` mode. */
export interface SdkLogprobsOutput {
  readonly mode: 'logprobs';
  readonly via: 'sampler' | 'training';
  /** The LoRA model the `training` way created (and unloaded). */
  readonly model_id?: string;
  /** Per item: the completion tokens' log-probabilities, and how many values the server gave for the whole sequence (n-1 for n tokens on SkyRL). */
  readonly results: { readonly completion_logprobs: number[]; readonly sequence_logprobs_count: number }[];
  readonly seconds: number;
}

/** Input of sdk_reference.py's `rl_step` mode (see the script's docstring). */
export interface SdkRlStepInput {
  readonly mode: 'rl_step';
  /** @default the server's modelDir */
  readonly baseModel?: string | undefined;
  /** @default 8 */
  readonly rank?: number | undefined;
  readonly promptTokens: readonly number[];
  /** @default 16 */
  readonly numSamples?: number | undefined;
  /** @default 16 */
  readonly maxTokens?: number | undefined;
  /** @default 1 */
  readonly steps?: number | undefined;
  /** @default 1e-4 */
  readonly learningRate?: number | undefined;
  /** @default 1 */
  readonly temperature?: number | undefined;
  /** @default 0 */
  readonly seed?: number | undefined;
  /** Submit optim_step without waiting for forward_backward. @default false */
  readonly pipelined?: boolean | undefined;
}

/** One step of the `rl_step` mode, wall seconds per phase. */
export interface SdkRlStep {
  readonly step: number;
  readonly sample_s: number;
  readonly forward_backward_s: number;
  readonly optim_step_s: number;
  readonly save_weights_for_sampler_s: number;
  readonly step_s: number;
  readonly sampler_path: string;
  readonly completion_tokens: number[];
  readonly rewards: number[];
  readonly grad_norm: number | null;
  readonly metrics: Record<string, number>;
}

/** Output of the `rl_step` mode. */
export interface SdkRlStepOutput {
  readonly mode: 'rl_step';
  readonly model_id: string;
  readonly create_model_s: number;
  readonly initial_save_s: number;
  readonly steps: SdkRlStep[];
  readonly seconds: number;
}

/**
 * Runs test/tinker/sdk_reference.py (the official tinker SDK) against `server` and resolves to its
 * JSON answer; rejects with the script's error and stderr tail when it fails.
 *
 * @example
 * const { results } = await runSdkReference(server, { mode: 'logprobs', items: [{ promptTokens: [9707], completionTokens: [11] }] });
 */
export async function runSdkReference(
  server: Pick<SkyrlServer, 'baseURL' | 'modelDir'>,
  input: SdkLogprobsInput,
  options?: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined },
): Promise<SdkLogprobsOutput>;
export async function runSdkReference(
  server: Pick<SkyrlServer, 'baseURL' | 'modelDir'>,
  input: SdkRlStepInput,
  options?: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined },
): Promise<SdkRlStepOutput>;
export async function runSdkReference(
  server: Pick<SkyrlServer, 'baseURL' | 'modelDir'>,
  input: SdkLogprobsInput | SdkRlStepInput,
  options: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined } = {},
): Promise<SdkLogprobsOutput | SdkRlStepOutput> {
  const timeoutMs = options.timeoutMs ?? 10 * MINUTE;
  const common = { base_url: server.baseURL, timeout_s: timeoutMs / SECOND - 5 };
  const wire =
    input.mode === 'logprobs'
      ? {
          ...common,
          mode: input.mode,
          ...(input.modelPath === undefined
            ? { base_model: input.baseModel ?? server.modelDir }
            : { model_path: input.modelPath }),
          items: input.items.map((item) => ({
            prompt_tokens: item.promptTokens,
            completion_tokens: item.completionTokens,
          })),
          via: input.via ?? 'sampler',
          rank: input.rank ?? 8,
        }
      : {
          ...common,
          mode: input.mode,
          base_model: input.baseModel ?? server.modelDir,
          rank: input.rank ?? 8,
          prompt_tokens: input.promptTokens,
          num_samples: input.numSamples ?? 16,
          max_tokens: input.maxTokens ?? 16,
          steps: input.steps ?? 1,
          learning_rate: input.learningRate ?? 1e-4,
          temperature: input.temperature ?? 1,
          seed: input.seed ?? 0,
          pipelined: input.pipelined ?? false,
        };
  const venv = skyrlVenvDir();
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONUNBUFFERED: '1', HF_HUB_OFFLINE: '1' };
  delete env['TINKER_BASE_URL'];
  delete env['TINKER_API_KEY'];
  const { stdout, stderr } = await runCommand(venvPython(venv), [SDK_REFERENCE_SCRIPT], {
    timeoutMs,
    env,
    input: JSON.stringify(wire),
    signal: options.signal,
    check: false,
  });
  const last = stdout.trim().split('\n').at(-1) ?? '';
  let parsed: unknown;
  try {
    parsed = JSON.parse(last);
  } catch {
    throw new Error(
      `Expected a JSON line from sdk_reference.py, got ${JSON.stringify(last.slice(0, 300))}\n${stderr.slice(-3000)}`,
    );
  }
  if (typeof parsed === 'object' && parsed !== null && 'error' in parsed)
    throw new Error(`sdk_reference.py (${input.mode}) failed: ${String(parsed.error)}\n${stderr.slice(-3000)}`);
  return parsed as SdkLogprobsOutput | SdkRlStepOutput;
}
