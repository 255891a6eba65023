/**
 * Entry point of the training worker thread: runs the jobs the engine posts, one at a time, and
 * posts back their events and results.
 */
import { parentPort } from 'node:worker_threads';
import { loadTensorFlow } from './backend.js';
import { loadDefaultTextLayer } from '../text/loader.js';
import { workerBaseCache } from './hf/runtime.js';
import { runHfTrainingJob } from './hf/trainer.js';
import { runTrainingJob } from './trainer.js';
import type { TrainingRequest, TrainingResponse } from './training-protocol.js';
import type { EngineTrainingEvent } from './types.js';

const port = parentPort;
if (!port) throw new Error('training-worker must run in a worker thread.');

const cancelled = new Set<number>();
let queue: Promise<void> = Promise.resolve();

port.on('message', (message: TrainingRequest) => {
  if (message.type === 'cancel') {
    cancelled.add(message.id);
    return;
  }
  const { id, job, modelDirectory } = message;
  queue = queue.then(async () => {
    const post = (response: TrainingResponse): void => port.postMessage(response);
    try {
      const hooks = {
        onEvent: (event: EngineTrainingEvent) => post({ type: 'event', id, event }),
        isCancelled: () => cancelled.has(id),
      };
      const result = modelDirectory
        ? await runHfTrainingJob(
            await loadTensorFlow(),
            job,
            hooks,
            modelDirectory,
            loadDefaultTextLayer,
            workerBaseCache,
          )
        : await runTrainingJob(job, hooks);
      post({ type: 'done', id, result });
    } catch (error) {
      post({ type: 'failed', id, message: error instanceof Error ? error.message : String(error) });
    } finally {
      cancelled.delete(id);
    }
  });
});
