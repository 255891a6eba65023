/**
 * Loads tfjs-core with the wasm backend, once per thread, without letting its console output
 * reach the library's users.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { registerGradients } from './gradients.js';
import type { TensorFlow } from './tensorflow.js';

let loading: Promise<TensorFlow> | null = null;

async function quietly<T>(action: () => Promise<T>): Promise<T> {
  // tfjs announces itself (and suggests tfjs-node) on the console; library output must stay clean.
  const saved = { log: console.log, warn: console.warn, info: console.info };
  const silent = (): void => undefined;
  console.log = silent;
  console.warn = silent;
  console.info = silent;
  try {
    return await action();
  } finally {
    console.log = saved.log;
    console.warn = saved.warn;
    console.info = saved.info;
  }
}

function listenersOf(event: 'uncaughtException' | 'unhandledRejection'): Array<(...args: never[]) => void> {
  return event === 'uncaughtException'
    ? process.listeners('uncaughtException')
    : process.listeners('unhandledRejection');
}

async function load(): Promise<TensorFlow> {
  // The emscripten glue of the wasm backend installs process-wide handlers that rethrow every
  // unhandled rejection (printing the whole glue source); a library must not change that.
  const events = ['uncaughtException', 'unhandledRejection'] as const;
  const before = events.map((event) => new Set<unknown>(listenersOf(event)));
  try {
    return await loadQuietly();
  } finally {
    events.forEach((event, index) => {
      for (const listener of listenersOf(event)) {
        if (!before[index]?.has(listener)) process.removeListener(event, listener as (...args: unknown[]) => void);
      }
    });
  }
}

async function loadQuietly(): Promise<TensorFlow> {
  return quietly(async () => {
    const tf = await import('@tensorflow/tfjs-core');
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    const require = createRequire(import.meta.url);
    const packageDirectory = path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json'));
    wasm.setWasmPaths(`${path.join(packageDirectory, 'dist')}${path.sep}`);
    tf.env().set('PROD', true);
    const ok = await tf.setBackend('wasm');
    if (!ok) throw new Error('Could not initialise the tfjs wasm backend (@tensorflow/tfjs-backend-wasm).');
    await tf.ready();
    registerGradients(tf);
    return tf;
  });
}

/**
 * The tfjs-core module with the wasm backend ready. Safe to call many times; loads once per
 * thread (each worker thread has its own).
 */
export function loadTensorFlow(): Promise<TensorFlow> {
  loading ??= load().catch((error: unknown) => {
    loading = null;
    throw error;
  });
  return loading;
}
