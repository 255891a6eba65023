/**
 * The tfjs-core module type, apart from the loader (`backend.ts`) so that the loader and the
 * gradients it registers do not import each other.
 */

/** The tfjs-core module type. */
export type TensorFlow = typeof import('@tensorflow/tfjs-core');
