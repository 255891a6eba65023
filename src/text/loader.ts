/**
 * How the engine gets a model's text layer (its own tokenizer and chat template, from the model
 * folder: `text-layer.ts`), and a way for tests to replace it.
 */
import { loadTextLayer } from './text-layer.js';
import type { TextLayer } from './text-layer.js';

export type { TextLayer } from './text-layer.js';

/** Loads the text layer of a model folder. */
export type TextLayerLoader = (directory: string) => Promise<TextLayer>;

/** Loads a model folder's text layer with {@link loadTextLayer}. */
export const loadDefaultTextLayer: TextLayerLoader = (directory) => loadTextLayer(directory);
