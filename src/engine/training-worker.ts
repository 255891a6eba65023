/**
 * Entry point of the training worker thread: runs the jobs the engine posts, one at a time, and
 * posts back their events and results.
 */
import { parentPort } from 'node:worker_threads';
import { runTrainingJob } from './trainer.js';
import type { TrainingRequest, TrainingResponse } from './training-protocol.js';

const port = parentPort;
if (!port) throw new Error('training-worker must run in a worker thread.');

const cancelled = new Set<number>();
let queue: Promise<void> = Promise.resolve();

port.on('message', (message: TrainingRequest) => {
  if (message.type === 'cancel') {
    cancelled.add(message.id);
    return;
  }
  const { id, job } = message;
  queue = queue.then(async () => {
    const post = (response: TrainingResponse): void => port.postMessage(response);
    try {
      const result = await runTrainingJob(job, {
        onEvent: (event) => post({ type: 'event', id, event }),
        isCancelled: () => cancelled.has(id),
      });
      post({ type: 'done', id, result });
    } catch (error) {
      post({ type: 'failed', id, message: error instanceof Error ? error.message : String(error) });
    } finally {
      cancelled.delete(id);
    }
  });
});
