/** AdamW on host weights, with state that a checkpoint carries to the next job. */
import type { HostWeights, OptimizerState } from './weights.js';

/** AdamW hyperparameters other than the learning rate. */
export interface AdamWOptions {
  /** @default 0.9 */
  readonly beta1: number;
  /** @default 0.99 */
  readonly beta2: number;
  /** @default 1e-8 */
  readonly epsilon: number;
  /** Decoupled weight decay, applied to matrices only (not norms, biases or embeddings). @default 0.01 */
  readonly weightDecay: number;
  /** Gradients are scaled down to this global L2 norm. @default 1 */
  readonly maxGradNorm: number;
}

/** Defaults of {@link AdamWOptions}. */
export const DEFAULT_ADAMW_OPTIONS: AdamWOptions = {
  beta1: 0.9,
  beta2: 0.99,
  epsilon: 1e-8,
  weightDecay: 0.01,
  maxGradNorm: 1,
};

function decays(name: string): boolean {
  return !name.endsWith('bias') && !name.endsWith('scale') && !name.endsWith('embedding');
}

/** AdamW over weights held in `Float32Array`s (updated in place). */
export class AdamW {
  private stepCount: number;
  private readonly firstMoments: HostWeights;
  private readonly secondMoments: HostWeights;

  constructor(
    private readonly weights: HostWeights,
    state: OptimizerState | null,
    private readonly options: AdamWOptions = DEFAULT_ADAMW_OPTIONS,
  ) {
    this.stepCount = state?.step ?? 0;
    const zeros = (): HostWeights =>
      new Map(
        [...weights].map(([name, tensor]) => [
          name,
          { shape: tensor.shape, data: new Float32Array(tensor.data.length) },
        ]),
      );
    this.firstMoments = state?.firstMoments ?? zeros();
    this.secondMoments = state?.secondMoments ?? zeros();
  }

  /**
   * Applies one update from `gradients` (by parameter name). Returns the gradient norm before
   * clipping.
   */
  step(gradients: ReadonlyMap<string, Float32Array>, learningRate: number): number {
    let squares = 0;
    for (const gradient of gradients.values()) for (const value of gradient) squares += value * value;
    const norm = Math.sqrt(squares);
    const clip = norm > this.options.maxGradNorm ? this.options.maxGradNorm / norm : 1;
    this.stepCount += 1;
    const { beta1, beta2, epsilon, weightDecay } = this.options;
    const correction1 = 1 - beta1 ** this.stepCount;
    const correction2 = 1 - beta2 ** this.stepCount;
    for (const [name, tensor] of this.weights) {
      const gradient = gradients.get(name);
      const m = this.firstMoments.get(name)?.data;
      const v = this.secondMoments.get(name)?.data;
      if (!gradient || !m || !v) continue;
      const data = tensor.data;
      const decay = decays(name) ? learningRate * weightDecay : 0;
      for (let index = 0; index < data.length; index += 1) {
        const g = (gradient[index] as number) * clip;
        const mi = beta1 * (m[index] as number) + (1 - beta1) * g;
        const vi = beta2 * (v[index] as number) + (1 - beta2) * g * g;
        m[index] = mi;
        v[index] = vi;
        data[index] =
          (data[index] as number) * (1 - decay) -
          (learningRate * (mi / correction1)) / (Math.sqrt(vi / correction2) + epsilon);
      }
    }
    return norm;
  }

  /** The state to save with the checkpoint. */
  state(): OptimizerState {
    return { step: this.stepCount, firstMoments: this.firstMoments, secondMoments: this.secondMoments };
  }
}
