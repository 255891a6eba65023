/** Messages between the engine and its training worker thread. */
import type { EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult } from './types.js';

/** Engine to worker. */
export type TrainingRequest =
  | {
      readonly type: 'train';
      readonly id: number;
      readonly job: EngineTrainingJob;
      /** Folder of the job's Hugging Face base model, or null for a built-in model. */
      readonly modelDirectory: string | null;
    }
  | { readonly type: 'cancel'; readonly id: number };

/** Worker to engine. */
export type TrainingResponse =
  | { readonly type: 'event'; readonly id: number; readonly event: EngineTrainingEvent }
  | { readonly type: 'done'; readonly id: number; readonly result: EngineTrainingResult }
  | { readonly type: 'failed'; readonly id: number; readonly message: string };
