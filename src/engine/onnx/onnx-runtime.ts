/**
 * The engine's runtimes: onnxruntime-node (native MLAS kernels on every core, prebuilt for Linux,
 * macOS and Windows on x64 and arm64) when it loads, else tfjs-core's wasm backend (one thread),
 * the correct fallback. `POLICYLOOP_ENGINE_RUNTIME` = `onnxruntime` | `tfjs-wasm` forces one.
 */
import { createRequire } from 'node:module';
import os from 'node:os';

/** The runtimes the engine computes on. */
export const ENGINE_RUNTIMES = ['onnxruntime', 'tfjs-wasm'] as const;

/** One of {@link ENGINE_RUNTIMES}. */
export type EngineRuntimeName = (typeof ENGINE_RUNTIMES)[number];

/** The environment variable that forces a runtime. */
export const ENGINE_RUNTIME_VARIABLE = 'POLICYLOOP_ENGINE_RUNTIME';

/** What the engine runs on, as `policyloop serve` prints it and `/v1/system-check` reports it. */
export interface EngineRuntimeInfo {
  readonly name: EngineRuntimeName;
  /** The runtime package's version. */
  readonly version: string;
  /** Threads one computation uses. */
  readonly threads: number;
  /** Why the fallback runs (onnxruntime-node missing or failing to load), when it does. */
  readonly fallbackReason?: string | undefined;
}

/** The onnxruntime-node module. */
export type OnnxRuntime = typeof import('onnxruntime-node');

/** An onnxruntime session. */
export type OnnxSession = import('onnxruntime-node').InferenceSession;

/** Thrown when the onnxruntime runtime is asked for and cannot load. */
export class EngineRuntimeError extends Error {
  override readonly name = 'EngineRuntimeError';
}

let loading: Promise<OnnxRuntime> | null = null;

/** Loads onnxruntime-node once per thread; rejects with an {@link EngineRuntimeError} saying why. */
export function loadOnnxRuntime(): Promise<OnnxRuntime> {
  loading ??= (async () => {
    try {
      const module = (await import('onnxruntime-node')) as OnnxRuntime & { default?: OnnxRuntime };
      const ort = (module.InferenceSession ? module : module.default) as OnnxRuntime;
      if (!ort?.InferenceSession) throw new Error('the module has no InferenceSession');
      return ort;
    } catch (error) {
      loading = null;
      throw new EngineRuntimeError(
        `onnxruntime-node could not load (${(error as Error).message.split('\n')[0]}). It is an optional dependency of policyloop: install it with \`npm install onnxruntime-node\` (add \`onnxruntime-node-install=skip\` to .npmrc to skip its CUDA download), or set ${ENGINE_RUNTIME_VARIABLE}=tfjs-wasm.`,
        { cause: error },
      );
    }
  })();
  return loading;
}

/** The runtime `POLICYLOOP_ENGINE_RUNTIME` asks for, or undefined for the default (onnxruntime when it loads). */
export function requestedEngineRuntime(env: NodeJS.ProcessEnv = process.env): EngineRuntimeName | undefined {
  const value = env[ENGINE_RUNTIME_VARIABLE]?.trim();
  if (value === undefined || value === '' || value === 'auto') return undefined;
  if ((ENGINE_RUNTIMES as readonly string[]).includes(value)) return value as EngineRuntimeName;
  throw new EngineRuntimeError(
    `${ENGINE_RUNTIME_VARIABLE}="${value}" is not a runtime of the engine: use ${ENGINE_RUNTIMES.join(' or ')} (or leave it unset for onnxruntime when it loads, else tfjs-wasm).`,
  );
}

/** Threads an onnxruntime computation uses: every core the process may use. */
export function onnxThreads(): number {
  return Math.max(1, typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length);
}

let resolving: Promise<EngineRuntimeInfo> | null = null;

/**
 * The runtime the engine computes on in this process: `requested` (an engine option) when given,
 * else the one `POLICYLOOP_ENGINE_RUNTIME` names (rejecting when that is onnxruntime and it cannot
 * load), else onnxruntime when it loads, else tfjs-wasm with the reason.
 */
export function engineRuntime(requested?: EngineRuntimeName): Promise<EngineRuntimeInfo> {
  if (requested !== undefined) {
    if (!(ENGINE_RUNTIMES as readonly string[]).includes(requested))
      return Promise.reject(
        new EngineRuntimeError(
          `Expected the engine runtime ${ENGINE_RUNTIMES.join(' or ')}, got ${JSON.stringify(requested)}.`,
        ),
      );
    return resolveRuntime(requested);
  }
  resolving ??= resolveRuntime(requestedEngineRuntime()).catch((error: unknown) => {
    resolving = null;
    throw error;
  });
  return resolving;
}

async function resolveRuntime(requested: EngineRuntimeName | undefined): Promise<EngineRuntimeInfo> {
  if (requested === 'tfjs-wasm') return tfjsInfo(undefined);
  try {
    const ort = await loadOnnxRuntime();
    return { name: 'onnxruntime', version: ort.env.versions.common ?? 'unknown', threads: onnxThreads() };
  } catch (error) {
    if (requested === 'onnxruntime') throw error;
    return tfjsInfo((error as Error).message);
  }
}

function tfjsInfo(fallbackReason: string | undefined): EngineRuntimeInfo {
  let version = 'unknown';
  try {
    version = (createRequire(import.meta.url)('@tensorflow/tfjs-backend-wasm/package.json') as { version: string })
      .version;
  } catch {
    // not installed: the engine reports that itself when it loads
  }
  return { name: 'tfjs-wasm', version, threads: 1, fallbackReason };
}

/** A one-line description of a runtime, as `policyloop serve` prints it. */
export function describeEngineRuntime(info: EngineRuntimeInfo): string {
  const base = `${info.name} ${info.version}, ${info.threads} thread${info.threads === 1 ? '' : 's'}`;
  return info.fallbackReason === undefined ? base : `${base} (fallback: ${info.fallbackReason})`;
}

/**
 * An onnxruntime session for the model `bytes`, on `threads` intra-op threads (every core by
 * default), with every graph optimisation. `options.memoryArena: false` frees each run's
 * intermediates when it ends instead of keeping them in a per-session arena (training runs
 * several sessions, whose arenas would each hold their own peak). `options.spinning: false` makes
 * idle pool threads sleep rather than spin between ops (onnxruntime's
 * `session.intra_op.allow_spinning`): what a session sharing the cores with other work wants.
 */
export async function createOnnxSession(
  bytes: Uint8Array,
  threads = onnxThreads(),
  options: { readonly memoryArena?: boolean | undefined; readonly spinning?: boolean | undefined } = {},
): Promise<OnnxSession> {
  const ort = await loadOnnxRuntime();
  return ort.InferenceSession.create(bytes, {
    ...(options.spinning === false ? { extra: { session: { intra_op: { allow_spinning: '0' } } } } : {}),
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableCpuMemArena: options.memoryArena ?? true,
  });
}
