/**
 * Runs one training job (RL or SFT) to completion in the current thread: loads the policy's
 * weights and optimizer state, takes gradient steps, and writes the new checkpoint.
 */
import type { Tensor, Tensor2D } from '@tensorflow/tfjs-core';
import type { ExperimentalTrainingConfig, SFTRow, TrajectoryGroup } from '../schema/index.js';
import { loadTensorFlow } from './backend.js';
import type { TensorFlow } from './tensorflow.js';
import { MODEL_CONFIGS, tokenizerOf } from './model-config.js';
import type { ModelConfig } from './model-config.js';
import { AdamW } from './optimizer.js';
import { buildRlData, buildSftSequences, scalesRewards } from './training-data.js';
import type { RlData, TrainingSequence } from './training-data.js';
import { forwardLogits, targetScores } from './transformer.js';
import type { TokenScores } from './transformer.js';
import type { EngineTrainingEvent, EngineTrainingJob, EngineTrainingResult } from './types.js';
import { initialWeights, readCheckpointWeights, readOptimizerState, writeCheckpoint } from './weights.js';
import type { HostWeights } from './weights.js';
import { maxOf } from '../internal/arrays.js';
import {
  addObjectiveSums,
  emptyObjectiveSums,
  objectiveConfigProblem,
  objectiveSettings,
  objectiveTokenLosses,
} from './objective.js';
import type { ObjectiveSettings, ObjectiveSums } from './objective.js';

/**
 * Learning rate of RL jobs whose `experimental_config.learning_rate` is null or absent.
 * Tuned for the engine's small models with AdamW; the hosted service's usual 5e-6 (for LoRA on
 * 14B models) barely moves them.
 */
export const DEFAULT_LEARNING_RATE = 5e-3;

/** Learning rate of SFT jobs whose `config.learning_rate` is null or absent. */
export const DEFAULT_SFT_LEARNING_RATE = 5e-3;

/** Rows per SFT batch when `batch_size` is `"auto"`, null or absent. */
export const AUTO_SFT_BATCH_SIZE = 16;

/** Padded tokens per forward pass; bigger batches accumulate gradients over several passes. */
const TOKENS_PER_PASS = 8192;

/** Most attention scores (rows × heads × queries × keys) per forward pass, bounding its memory. */
const SCORES_PER_PASS = 24 * 1024 * 1024;

/**
 * Most learned positions × vocabulary rows per forward pass. Each learned position's logits are
 * held about ten times over (logits, log-softmax, its exponent, the one-hot targets, products,
 * and their gradients): with Qwen3's 151,936 ids that is ~6 MB a position, so 16 rollouts of 28
 * learned tokens in one pass needed ~2.7 GB and ran the wasm heap out ("memory access out of
 * bounds"). 16M floats (64 MB a copy) keep ~105 Qwen3 positions per pass; the built-in models'
 * small vocabularies never reach it.
 */
export const LOGITS_PER_PASS = 16 * 1024 * 1024;

/** Attention scores of one row of `length` tokens (full, or sliding-window blocks). */
function scoresPerRow(config: ModelConfig, length: number): number {
  const window = config.attentionWindow;
  if (window !== undefined && window < length)
    return config.headCount * Math.ceil(length / window) * window * 2 * window;
  return config.headCount * length * length;
}

/** Hooks of a running job. */
export interface TrainingHooks {
  readonly onEvent: (event: EngineTrainingEvent) => void;
  /** Polled between passes; when true the job stops with an error and writes nothing. */
  readonly isCancelled?: (() => boolean) | undefined;
}

/** Loss, gradients and statistics of one optimizer step. */
export interface StepResult {
  readonly loss: number;
  readonly entropy: number;
  readonly gradients: Map<string, Float32Array>;
  readonly trainableTokens: number;
  readonly meanRatio: number;
  readonly clippedFraction: number;
  readonly approximateKl: number;
  /** The RL objective's sums over the step's tokens (zero for SFT). */
  readonly sums: ObjectiveSums;
}

/** Which loss a step computes: SFT's cross-entropy, or the RL objective of {@link objectiveSettings}. */
export interface LossSettings extends ObjectiveSettings {
  readonly kind: 'rl' | 'sft';
}

/**
 * The loss of a job kind and its config (the RL objective's settings, `art/loss.py`'s defaults).
 * @example
 * computeStep(tf, model, sequences, lossSettings('rl', { importance_sampling_level: 'sequence' }));
 */
export function lossSettings(kind: 'rl' | 'sft', config: ExperimentalTrainingConfig | null): LossSettings {
  return { kind, ...objectiveSettings(config) };
}

/**
 * The reference policy's logprob of `targets[i]` at flat position `positions[i]` of right-padded
 * `tokens` `[batch, length]` (no gradient): what the KL penalty compares with.
 */
export type ReferenceScorer = (...args: ScoredPositions) => Float32Array | Promise<Float32Array>;

/**
 * The positions a pass scores: right-padded `tokens` `[batch, length]`, the flat `positions` whose
 * next token counts, each row's offset, and the `targets` (next tokens) there.
 */
export type ScoredPositions = [
  tokens: Int32Array,
  batch: number,
  length: number,
  positions: Int32Array,
  offsets: readonly number[],
  targets: Int32Array,
];

/**
 * A {@link ReferenceScorer} of `model`'s forward pass with other `weights` (an earlier checkpoint,
 * the base weights, another adapter), run outside any gradient tape.
 * @example
 * const reference = referenceScorer(tf, trainable, await loadPolicyWeights(config, null));
 */
export function referenceScorer(
  tf: TensorFlow,
  model: Pick<DifferentiableModel, 'vocabularySize' | 'forward' | 'tokenLogprobs' | 'native'>,
  weights: HostWeights,
): ReferenceScorer {
  const native = model.native;
  if (native)
    return async (tokens, batch, length, positions, offsets, targets) =>
      (await native.scores(weights, tokens, batch, length, positions, offsets, targets, false)).logprobs;
  return (tokens, batch, length, positions, offsets, targets) =>
    tf.tidy(() => {
      const parameters = Object.fromEntries(
        [...weights.entries()].map(([name, tensor]) => [name, tf.tensor(tensor.data, [...tensor.shape])]),
      );
      const scores = model.tokenLogprobs
        ? model.tokenLogprobs(parameters, tokens, batch, length, positions, offsets, targets)
        : targetScores(
            tf,
            tf.logSoftmax(model.forward(parameters, tokens, batch, length, positions, offsets)) as Tensor2D,
            targets,
            model.vocabularySize,
          );
      return Float32Array.from(scores.logprobs.dataSync());
    });
}

/**
 * What the engine's trainer ({@link computeStep}) needs of a model: its trainable weights (updated
 * by the optimizer), a differentiable forward pass over them, and the numbers that size its
 * passes. (Not the library's `TrainableModel`, the handle a script trains.)
 */
export interface DifferentiableModel {
  readonly vocabularySize: number;
  readonly contextLength: number;
  /** Attention scores of one row of `length` tokens. */
  readonly scoresPerRow: (length: number) => number;
  /** Most padded tokens in one forward and backward pass (bounds the activations kept). @default 8192 */
  readonly tokensPerPass?: number | undefined;
  /** The weights the gradients are taken for, by name. */
  readonly weights: HostWeights;
  /**
   * The log-probability of `targets[i]` at flat position `positions[i]` of right-padded `tokens`
   * `[batch, length]` (differentiable) and the entropy there (a metric; the caller disposes it),
   * computed without holding every position's logits: when given, it replaces `forward` and a
   * pass is not bounded by {@link LOGITS_PER_PASS}.
   */
  readonly tokenLogprobs?: ((...args: [...PassArguments, targets: Int32Array]) => TokenScores) | undefined;
  /** Next-token logits at the flat `positions` of right-padded `tokens` `[batch, length]`. */
  readonly forward: (...args: PassArguments) => Tensor;
  /**
   * The pass on a runtime other than tfjs (onnxruntime): when given, {@link computeStep} takes the
   * learned tokens' logprobs from it, the objective's gradient with respect to them from tfjs (a
   * small tensor), and the weights' gradients from its backward pass.
   */
  readonly native?: NativeTraining | undefined;
}

/** Scores of a pass computed by a {@link NativeTraining}, and its backward pass. */
export interface NativeScores {
  readonly logprobs: Float32Array;
  readonly entropy: Float32Array;
  /** The weights' gradients (by name) of `Σ dLogprobs[i] · logprobs[i]`. */
  readonly backward: (dLogprobs: Float32Array) => Promise<Map<string, Float32Array>>;
}

/** A model's training pass outside tfjs (see {@link DifferentiableModel.native}). */
export interface NativeTraining {
  /**
   * The logprob of `targets[i]` at flat position `positions[i]` of right-padded `tokens`
   * `[batch, length]` with `weights`, and the entropy there; `keep` keeps what the backward pass needs.
   */
  readonly scores: (weights: HostWeights, ...args: [...ScoredPositions, keep: boolean]) => Promise<NativeScores>;
}

/**
 * What a forward pass of a {@link DifferentiableModel} takes: the trained parameters by name, the
 * right-padded `tokens` `[batch, length]`, the flat `positions` whose next token counts, and each
 * row's offset.
 */
export type PassArguments = [
  parameters: Record<string, Tensor>,
  tokens: Int32Array,
  batch: number,
  length: number,
  positions: Int32Array,
  offsets: readonly number[],
];

/**
 * The built-in models as {@link DifferentiableModel}s: every weight is trained.
 * @example
 * const model = builtInDifferentiable(tf, modelConfigOf('policyloop/tiny-chat'), initialWeights(config));
 */
export function builtInDifferentiable(tf: TensorFlow, config: ModelConfig, weights: HostWeights): DifferentiableModel {
  return {
    vocabularySize: config.vocabularySize,
    contextLength: config.contextLength,
    scoresPerRow: (length) => scoresPerRow(config, length),
    weights,
    forward: (parameters, tokens, batch, length, positions, offsets) =>
      forwardLogits(tf, config, parameters, tokens, batch, length, positions, offsets),
  };
}

/**
 * The sequences of one optimizer step split into forward passes, each bounded in padded tokens,
 * attention scores and learned positions' logits (a single sequence over a bound still gets a
 * pass of its own).
 */
export function trainingPasses(
  config: Pick<DifferentiableModel, 'vocabularySize' | 'scoresPerRow' | 'tokensPerPass' | 'tokenLogprobs'>,
  sequences: readonly TrainingSequence[],
): TrainingSequence[][] {
  const learnedOf = (sequence: TrainingSequence): number => sequence.mask.slice(1).reduce((a, b) => a + b, 0);
  const sorted = [...sequences].sort((a, b) => a.tokens.length - b.tokens.length);
  const result: TrainingSequence[][] = [];
  let current: TrainingSequence[] = [];
  let learned = 0;
  for (const sequence of sorted) {
    const length = maxOf(
      current.map((item) => item.tokens.length),
      sequence.tokens.length,
    );
    const rows = current.length + 1;
    if (
      current.length > 0 &&
      (rows * length > (config.tokensPerPass ?? TOKENS_PER_PASS) ||
        rows * config.scoresPerRow(length) > SCORES_PER_PASS ||
        (!config.tokenLogprobs && (learned + learnedOf(sequence)) * config.vocabularySize > LOGITS_PER_PASS))
    ) {
      result.push(current);
      current = [];
      learned = 0;
    }
    current.push(sequence);
    learned += learnedOf(sequence);
  }
  if (current.length > 0) result.push(current);
  return result;
}

/**
 * Loss and gradients of one optimizer step over `sequences` (accumulated over passes). The loss is
 * a mean over all trainable tokens of the step.
 */
export async function computeStep(
  tf: TensorFlow,
  config: DifferentiableModel,
  sequences: readonly TrainingSequence[],
  settings: LossSettings,
  reference?: ReferenceScorer,
): Promise<StepResult> {
  const weights = config.weights;
  const names = [...weights.keys()];
  const gradients = new Map<string, Float32Array>(
    names.map((name) => [name, new Float32Array((weights.get(name) as { data: Float32Array }).data.length)]),
  );
  const trainableTokens = sequences.reduce(
    (sum, sequence) => sum + sequence.mask.slice(1).reduce((a, b) => a + b, 0),
    0,
  );
  if (trainableTokens === 0)
    return {
      loss: 0,
      entropy: 0,
      gradients,
      trainableTokens,
      meanRatio: 1,
      clippedFraction: 0,
      approximateKl: 0,
      sums: emptyObjectiveSums(),
    };
  const totals: StepTotals = { loss: 0, entropy: 0, sums: emptyObjectiveSums() };
  const step: StepContext = { tf, config, names, settings, trainableTokens, totals, gradients, reference };
  for (const pass of trainingPasses(config, sequences)) {
    const inputs = passInputs(config.contextLength, pass);
    if (inputs !== null) await (config.native ? accumulateNativePass(step, inputs) : accumulatePass(step, inputs));
  }
  return {
    loss: totals.loss,
    entropy: totals.entropy / trainableTokens,
    gradients,
    trainableTokens,
    meanRatio: totals.sums.ratio / trainableTokens || 1,
    clippedFraction: totals.sums.clipped / trainableTokens,
    approximateKl: totals.sums.kl / trainableTokens,
    sums: totals.sums,
  };
}

/** Sums over the passes of one step: loss, entropy, and the RL objective's sums. */
interface StepTotals {
  loss: number;
  entropy: number;
  readonly sums: ObjectiveSums;
}

/** What every pass of one step shares. */
interface StepContext {
  readonly tf: TensorFlow;
  readonly config: DifferentiableModel;
  /** The weights' names, in the order of the parameter tensors. */
  readonly names: readonly string[];
  readonly settings: LossSettings;
  /** The step's trainable tokens: the loss is a mean over them. */
  readonly trainableTokens: number;
  readonly totals: StepTotals;
  /** The step's gradients by weight name, summed over its passes. */
  readonly gradients: Map<string, Float32Array>;
  /** The KL penalty's reference policy (RL with `kl_penalty_coef` > 0). */
  readonly reference?: ReferenceScorer | undefined;
}

/**
 * The model inputs of one pass: right-padded tokens `[batch, steps]` and each row's offset, and at
 * the learned positions (flat `positions`) the targets, mask, advantages and old logprobs (NaN
 * where the trajectory has none).
 */
interface PassInputs {
  readonly batch: number;
  readonly steps: number;
  readonly offsets: number[];
  readonly inputs: Int32Array;
  readonly positions: Int32Array;
  readonly targets: Int32Array;
  readonly mask: Float32Array;
  readonly advantages: Float32Array;
  readonly oldLogprobs: Float32Array;
  /** The row (sequence) of each learned position. */
  readonly rows: Int32Array;
}

/** The inputs of a pass over `pass`, or null when it has no learned position. */
function passInputs(contextLength: number, pass: readonly TrainingSequence[]): PassInputs | null {
  const length = Math.min(contextLength + 1, maxOf(pass.map((sequence) => sequence.tokens.length)));
  const steps = length - 1;
  const batch = pass.length;
  const offsets = pass.map((sequence) => sequence.offset ?? 0);
  const inputs = new Int32Array(batch * steps);
  const targets = new Int32Array(batch * steps);
  const mask = new Float32Array(batch * steps);
  const advantages = new Float32Array(batch * steps);
  const old = new Float32Array(batch * steps).fill(Number.NaN);
  pass.forEach((sequence, row) => {
    for (let t = 0; t < steps; t += 1) {
      const index = row * steps + t;
      if (t + 1 < sequence.tokens.length) {
        inputs[index] = sequence.tokens[t] as number;
        targets[index] = sequence.tokens[t + 1] as number;
        mask[index] = sequence.mask[t + 1] as number;
        advantages[index] = sequence.weights[t + 1] as number;
        old[index] = sequence.oldLogprobs[t + 1] as number;
      } else if (t < sequence.tokens.length) {
        inputs[index] = sequence.tokens[t] as number;
      }
    }
  });
  // Only the learned positions are projected to the vocabulary (on long prompts most are context).
  const selected: number[] = [];
  for (let index = 0; index < mask.length; index += 1) if ((mask[index] as number) > 0) selected.push(index);
  if (selected.length === 0) return null;
  const pick = <T extends Float32Array | Int32Array>(values: T): T =>
    values.constructor === Int32Array
      ? (Int32Array.from(selected, (index) => values[index] as number) as T)
      : (Float32Array.from(selected, (index) => values[index] as number) as T);
  return {
    batch,
    steps,
    offsets,
    inputs,
    positions: Int32Array.from(selected),
    targets: pick(targets),
    mask: pick(mask),
    advantages: pick(advantages),
    oldLogprobs: pick(old),
    rows: Int32Array.from(selected, (index) => Math.floor(index / steps)),
  };
}

/** The reference policy's logprobs of a pass (RL with a KL penalty), outside any gradient tape. */
async function referenceLogprobs(step: StepContext, pass: PassInputs): Promise<Float32Array | undefined> {
  const { settings } = step;
  if (!(settings.kind === 'rl' && settings.klPenaltyCoef > 0 && step.reference)) return undefined;
  return step.reference(pass.inputs, pass.batch, pass.steps, pass.positions, pass.offsets, pass.targets);
}

/** The loss of a pass from its learned tokens' logprobs, inside the gradient tape. */
function passLoss(
  step: StepContext,
  pass: PassInputs,
  tokenLogprobs: Tensor,
  maskTensor: Tensor,
  reference: Float32Array | undefined,
): Tensor {
  const { tf, settings, trainableTokens } = step;
  if (settings.kind === 'sft') return tf.div(tf.neg(tf.sum(tf.mul(tokenLogprobs, maskTensor))), trainableTokens);
  return policyLoss(step, pass, tokenLogprobs, maskTensor, reference);
}

/**
 * One pass on the model's native runtime: its logprobs, the loss's gradient with respect to them
 * (tfjs, over a tensor of the pass's learned tokens), then the native backward pass.
 */
async function accumulateNativePass(step: StepContext, pass: PassInputs): Promise<void> {
  const { tf, config, totals } = step;
  const native = config.native as NativeTraining;
  const reference = await referenceLogprobs(step, pass);
  const scores = await native.scores(
    config.weights,
    pass.inputs,
    pass.batch,
    pass.steps,
    pass.positions,
    pass.offsets,
    pass.targets,
    true,
  );
  const logprobs = tf.tensor1d(scores.logprobs);
  const maskTensor = tf.tensor1d(pass.mask);
  const { value, grads } = tf.valueAndGrads((tokenLogprobs: Tensor) =>
    passLoss(step, pass, tokenLogprobs, maskTensor, reference),
  )([logprobs]);
  totals.loss += value.dataSync()[0] as number;
  scores.entropy.forEach((entropy, index) => {
    totals.entropy += entropy * (pass.mask[index] as number);
  });
  const dLogprobs = Float32Array.from((grads[0] as Tensor).dataSync() as Float32Array);
  for (const tensor of [value, ...grads, logprobs, maskTensor]) tensor.dispose();
  const gradients = await scores.backward(dLogprobs);
  for (const [name, sum] of step.gradients) {
    const values = gradients.get(name);
    if (!values) throw new Error(`The native backward pass gave no gradient for ${name}.`);
    for (let position = 0; position < sum.length; position += 1)
      sum[position] = (sum[position] as number) + (values[position] as number);
  }
}

/** Runs one forward and backward pass and adds its loss, entropy and gradients to the step's. */
async function accumulatePass(step: StepContext, pass: PassInputs): Promise<void> {
  const { tf, config, names, totals } = step;
  const { batch, steps, offsets, inputs, positions } = pass;
  const parameterTensors = names.map((name) => {
    const tensor = config.weights.get(name) as { shape: readonly number[]; data: Float32Array };
    return tf.tensor(tensor.data, [...tensor.shape]);
  });
  // The reference policy's logprobs, outside the gradient tape.
  const reference = await referenceLogprobs(step, pass);
  let entropyTensor: Tensor | null = null;
  const { value, grads } = tf.valueAndGrads((...parameters: Tensor[]) => {
    const byName = Object.fromEntries(names.map((name, index) => [name, parameters[index] as Tensor]));
    const maskTensor = tf.tensor1d(pass.mask);
    const scores = config.tokenLogprobs
      ? config.tokenLogprobs(byName, inputs, batch, steps, positions, offsets, pass.targets)
      : targetScores(
          tf,
          tf.logSoftmax(config.forward(byName, inputs, batch, steps, positions, offsets)) as Tensor2D,
          pass.targets,
          config.vocabularySize,
        );
    const tokenLogprobs = scores.logprobs;
    entropyTensor = tf.keep(tf.sum(tf.mul(scores.entropy, maskTensor)));
    scores.entropy.dispose();
    return passLoss(step, pass, tokenLogprobs, maskTensor, reference);
  })(parameterTensors);
  totals.loss += value.dataSync()[0] as number;
  totals.entropy += entropyTensor ? ((entropyTensor as Tensor).dataSync()[0] as number) : 0;
  names.forEach((name, index) => {
    const gradient = grads[index] as Tensor;
    const values = gradient.dataSync();
    const sum = step.gradients.get(name) as Float32Array;
    for (let position = 0; position < sum.length; position += 1)
      sum[position] = (sum[position] as number) + (values[position] as number);
  });
  value.dispose();
  (entropyTensor as Tensor | null)?.dispose();
  for (const tensor of [...grads, ...parameterTensors]) tensor.dispose();
}

/**
 * The RL loss of a pass ({@link objectiveTokenLosses}) from the learned tokens' logprobs, inside the
 * gradient tape, over the step's trained tokens; adds the objective's sums to the step's.
 */
function policyLoss(
  step: StepContext,
  pass: PassInputs,
  tokenLogprobs: Tensor,
  maskTensor: Tensor,
  reference: Float32Array | undefined,
): Tensor {
  const { tf, settings, trainableTokens, totals } = step;
  const { losses, sums } = objectiveTokenLosses(tf, settings, tokenLogprobs, {
    sampled: pass.oldLogprobs,
    advantages: pass.advantages,
    sequenceIds: pass.rows,
    sequenceCount: pass.batch,
    reference,
  });
  addObjectiveSums(totals.sums, sums);
  return tf.div(tf.sum(tf.mul(losses, maskTensor)), trainableTokens);
}

/** Cuts sequences longer than the context (plus one target token); counts the cut ones. */
export function truncate(
  config: { readonly contextLength: number },
  sequences: TrainingSequence[],
): { sequences: TrainingSequence[]; truncated: number } {
  // One more token than the context fits: the last position only serves as a target.
  const limit = config.contextLength + 1;
  let truncated = 0;
  const result = sequences.map((sequence) => {
    if (sequence.tokens.length <= limit) return sequence;
    truncated += 1;
    return {
      tokens: sequence.tokens.slice(0, limit),
      mask: sequence.mask.slice(0, limit),
      weights: sequence.weights.slice(0, limit),
      oldLogprobs: sequence.oldLogprobs.slice(0, limit),
    };
  });
  return { sequences: result, truncated };
}

/**
 * With a sliding attention window, the output at position `p` depends only on the tokens from
 * `p - layers × (window - 1)` on: tokens before that for the first learned token are cut (their
 * positions kept through `offset`), which leaves the losses and gradients as they were and
 * spares most of a long prompt's attention and MLP work.
 */
function cropToReceptiveField(config: ModelConfig, sequences: TrainingSequence[]): TrainingSequence[] {
  const window = config.attentionWindow;
  if (window === undefined) return sequences;
  const reach = config.layerCount * (window - 1);
  return sequences.map((sequence) => {
    const first = sequence.mask.indexOf(1);
    // Token `first` is predicted from the output at `first - 1`.
    const start = first < 0 ? 0 : Math.max(0, first - 1 - reach);
    if (start === 0) return sequence;
    return {
      tokens: sequence.tokens.slice(start),
      mask: sequence.mask.slice(start),
      weights: sequence.weights.slice(start),
      oldLogprobs: sequence.oldLogprobs.slice(start),
      offset: (sequence.offset ?? 0) + start,
    };
  });
}

/** Why an RL job has no trainable token, for its `training_failed` message. */
export function nothingToTrain(data: RlData, truncated: number, contextLength: number): string {
  const counts = `${data.trajectories} trajectories in ${data.groupsSubmitted} groups`;
  let why: string;
  if (data.choices === 0) {
    why =
      `no trajectory has a Choice (a sampled completion, the trainable part of messages_and_choices) among the ` +
      `${counts}; messages are context only`;
  } else if (data.groupsTrainable === 0) {
    why = `the rewards within each group are all equal (${counts}), so every advantage is 0`;
  } else if (truncated > 0) {
    why = `every trainable token lies past the context of ${contextLength} tokens (${truncated} sequences truncated)`;
  } else {
    why = `the groups whose rewards differ have no Choice with tokens (${counts})`;
  }
  return `The job has 0 trainable tokens: ${why}. Nothing was trained and no checkpoint was written.`;
}

/** Throws when the job was cancelled. */
export function checkCancelled(hooks: TrainingHooks): void {
  if (hooks.isCancelled?.()) throw new Error('The training job was cancelled.');
}

/** Model config of a job's base model, or an Error naming the known ones. */
export function modelConfigOf(baseModel: string): ModelConfig {
  const config = MODEL_CONFIGS.get(baseModel);
  if (!config)
    throw new Error(
      `Unknown base model ${JSON.stringify(baseModel)}: expected one of ${[...MODEL_CONFIGS.keys()].join(', ')}.`,
    );
  return config;
}

/** Loads the weights of a policy: a checkpoint directory, or the base model's initial weights. */
export async function loadPolicyWeights(config: ModelConfig, checkpointPath: string | null): Promise<HostWeights> {
  return checkpointPath ? readCheckpointWeights(config, checkpointPath) : initialWeights(config);
}

/**
 * How a model turns a job's data into training sequences: its tokenizer or chat template, then
 * the context rules (truncation, and cropping for a sliding window).
 */
export interface SequenceBuilder {
  readonly contextLength: number;
  readonly rl: (
    groups: readonly TrajectoryGroup[],
    config: ExperimentalTrainingConfig | null,
  ) => { data: RlData; sequences: TrainingSequence[]; truncated: number };
  readonly sft: (
    rows: readonly SFTRow[],
    assistantTurns: 'all' | 'last',
  ) => { sequences: TrainingSequence[]; truncated: number };
}

/**
 * Loads the KL penalty's reference policy of a job: the base weights (null; LoRA off for an
 * adapter) or a checkpoint or adapter directory.
 */
export type ReferenceLoader = (checkpointPath: string | null) => Promise<ReferenceScorer>;

/**
 * The reference policy of an RL job's KL penalty: the one the service resolved (`job.klReference`),
 * else `kl_ref_adapter_path`, else the base weights (null).
 * @example
 * klReferencePath({ ...job, config: { kl_penalty_coef: 0.1 } }); // null: the base model
 */
export function klReferencePath(job: Extract<EngineTrainingJob, { kind: 'rl' }>): string | null {
  if (job.klReference !== undefined) return job.klReference.checkpointPath;
  return job.config?.kl_ref_adapter_path ?? null;
}

/**
 * The factor on an RL step's learning rate: the step's reward std (mean over groups) with
 * `scale_learning_rate_by_reward_std_dev`, times the number of trained sequences to the power
 * `num_trajectories_learning_rate_multiplier_power` (ART's unsloth trainer: trajectories to that
 * power). 1 when neither is set.
 * @example
 * learningRateMultiplier({ num_trajectories_learning_rate_multiplier_power: 0.5 }, data, sequences); // √(trained sequences)
 */
export function learningRateMultiplier(
  config: ExperimentalTrainingConfig | null,
  data: Pick<RlData, 'rewardStdDev'>,
  sequences: readonly TrainingSequence[],
): number {
  let factor = 1;
  if (config?.scale_learning_rate_by_reward_std_dev) factor *= data.rewardStdDev;
  const power = config?.num_trajectories_learning_rate_multiplier_power ?? 0;
  if (power !== 0) factor *= sequences.filter((sequence) => sequence.mask.includes(1)).length ** power;
  return factor;
}

/** The step metrics of the objective's keys, each where it acts. */
function objectiveMetrics(
  settings: LossSettings,
  step: StepResult,
  multiplier: number,
  config: ExperimentalTrainingConfig | null,
): Record<string, number> {
  const { sums, trainableTokens } = step;
  const tokens = Math.max(1, trainableTokens);
  const metrics: Record<string, number> = { advantage: sums.advantage / tokens };
  if (multiplier !== 1) metrics['learning_rate_multiplier'] = multiplier;
  if (settings.level !== 'token' && sums.sequences > 0)
    metrics['sequence_importance_ratio'] = sums.sequenceRatio / sums.sequences;
  if (settings.ratioCap !== null) metrics['capped_fraction'] = sums.capped / tokens;
  if (settings.maskProbRatio) metrics['masked_fraction'] = sums.masked / tokens;
  if (settings.klPenaltyCoef > 0) metrics['kl_ref'] = sums.klReference / tokens;
  if (settings.truncatedImportanceSampling !== null) {
    metrics['tis_truncated_fraction'] = sums.truncated / tokens;
    metrics['tis_weight'] = sums.truncatedWeight / tokens;
  }
  if (config?.advantage_balance) metrics['advantage_balance'] = config.advantage_balance;
  return metrics;
}

/**
 * The gradient steps of a job, shared by every model: one RL step over all its sequences, or SFT
 * batches with their learning-rate schedule. Emits `training_started` and `gradient_step` events,
 * updates `trainable.weights` through `optimizer`, and returns the last metrics (the checkpoint's).
 */
export async function runSteps(
  tf: TensorFlow,
  job: EngineTrainingJob,
  hooks: TrainingHooks,
  trainable: DifferentiableModel,
  optimizer: AdamW,
  build: SequenceBuilder,
  reference?: ReferenceLoader,
): Promise<Record<string, number>> {
  let metrics: Record<string, number> = {};
  if (job.kind === 'rl') {
    const problem = objectiveConfigProblem(job.config);
    if (problem !== null) throw new Error(problem);
    const { data, sequences, truncated } = build.rl(job.trajectoryGroups, job.config);
    // A step without a trainable token would change nothing yet use up a step: fail the job.
    if (!sequences.some((sequence) => sequence.mask.includes(1)))
      throw new Error(nothingToTrain(data, truncated, build.contextLength));
    const baseRate = job.config?.learning_rate ?? DEFAULT_LEARNING_RATE;
    const multiplier = learningRateMultiplier(job.config, data, sequences);
    const learningRate = baseRate * multiplier;
    const settings = lossSettings('rl', job.config);
    const scorer = settings.klPenaltyCoef > 0 && reference ? await reference(klReferencePath(job)) : undefined;
    hooks.onEvent({ type: 'training_started', data: { num_sequences: 1 } });
    checkCancelled(hooks);
    const step = await computeStep(tf, trainable, sequences, settings, scorer);
    checkCancelled(hooks);
    // No trainable token left (checked above; kept for safety): no update, not even weight decay.
    const gradNorm = step.trainableTokens > 0 ? optimizer.step(step.gradients, learningRate) : 0;
    metrics = {
      loss: step.loss,
      policy_loss: step.loss,
      grad_norm: gradNorm,
      entropy: step.entropy,
      learning_rate: learningRate,
      num_trajectories: data.trajectories,
      num_trainable_tokens: step.trainableTokens,
      num_groups_submitted: data.groupsSubmitted,
      num_groups_trainable: data.groupsTrainable,
      num_sequences_truncated: truncated,
      reward: data.reward,
      reward_std_dev: data.rewardStdDev,
      importance_ratio: step.meanRatio,
      clip_fraction: step.clippedFraction,
      kl_div: step.approximateKl,
      scale_rewards: scalesRewards(job.config) ? 1 : 0,
      ...objectiveMetrics(settings, step, multiplier, job.config),
    };
    hooks.onEvent({ type: 'gradient_step', data: metrics });
  } else {
    const { sequences, truncated } = build.sft(job.rows, job.config?.assistant_turns ?? 'all');
    const requestedBatch = job.config?.batch_size;
    if (typeof requestedBatch === 'number' && !(Number.isInteger(requestedBatch) && requestedBatch >= 1)) {
      throw new Error(`config.batch_size must be a positive integer or "auto", got ${requestedBatch}.`);
    }
    const batchSize =
      typeof requestedBatch === 'number'
        ? requestedBatch
        : Math.min(AUTO_SFT_BATCH_SIZE, Math.max(1, sequences.length));
    const batches: TrainingSequence[][] = [];
    for (let start = 0; start < sequences.length; start += batchSize)
      batches.push(sequences.slice(start, start + batchSize));
    const rates = job.config?.learning_rate;
    hooks.onEvent({ type: 'training_started', data: { num_sequences: batches.length } });
    let totalTokens = 0;
    let lossSum = 0;
    for (const [index, batch] of batches.entries()) {
      // Let a cancel message (worker thread) or other work in between batches.
      await new Promise((resolve) => setImmediate(resolve));
      checkCancelled(hooks);
      // One learning rate per batch; a shorter list repeats its last value.
      const learningRate = Array.isArray(rates)
        ? (rates[Math.min(index, rates.length - 1)] ?? DEFAULT_SFT_LEARNING_RATE)
        : (rates ?? DEFAULT_SFT_LEARNING_RATE);
      const step = await computeStep(tf, trainable, batch, lossSettings('sft', null));
      const gradNorm = step.trainableTokens > 0 ? optimizer.step(step.gradients, learningRate) : 0;
      totalTokens += step.trainableTokens;
      lossSum += step.loss * step.trainableTokens;
      metrics = {
        loss: step.loss,
        grad_norm: gradNorm,
        entropy: step.entropy,
        learning_rate: learningRate,
        num_trajectories: batch.length,
        num_trainable_tokens: step.trainableTokens,
        num_groups_trainable: 0,
        num_sequences_truncated: truncated,
        batch_index: index,
        num_batches: batches.length,
      };
      hooks.onEvent({ type: 'gradient_step', data: metrics });
    }
    metrics = {
      ...metrics,
      mean_loss: totalTokens > 0 ? lossSum / totalTokens : 0,
      num_trainable_tokens_total: totalTokens,
    };
  }
  return metrics;
}

/**
 * Runs a training job in this thread and writes its checkpoint to `job.outputPath`.
 * Rejects with an Error whose message is fit for the user.
 */
export async function runTrainingJob(job: EngineTrainingJob, hooks: TrainingHooks): Promise<EngineTrainingResult> {
  const tf = await loadTensorFlow();
  const config = modelConfigOf(job.policy.baseModel);
  const weights = await loadPolicyWeights(config, job.policy.checkpointPath);
  const optimizer = new AdamW(
    weights,
    job.policy.checkpointPath ? await readOptimizerState(config, job.policy.checkpointPath) : null,
  );
  const metrics = await runSteps(
    tf,
    job,
    hooks,
    builtInDifferentiable(tf, config, weights),
    optimizer,
    {
      contextLength: config.contextLength,
      rl: (groups, trainingConfig) => {
        const data = buildRlData(groups, trainingConfig, tokenizerOf(config));
        const truncation = truncate(config, data.sequences);
        return { data, sequences: cropToReceptiveField(config, truncation.sequences), truncated: truncation.truncated };
      },
      sft: (rows, assistantTurns) => {
        const truncation = truncate(config, buildSftSequences(rows, assistantTurns, tokenizerOf(config)));
        return { sequences: cropToReceptiveField(config, truncation.sequences), truncated: truncation.truncated };
      },
    },
    async (checkpointPath) => {
      const differentiable = builtInDifferentiable(tf, config, await loadPolicyWeights(config, checkpointPath));
      return referenceScorer(tf, differentiable, differentiable.weights);
    },
  );
  checkCancelled(hooks);
  await writeCheckpoint(job.outputPath, weights, optimizer.state(), {
    format: 'policyloop-checkpoint',
    base_model: config.id,
    step: job.step,
    kind: job.kind,
    training_config: job.config,
    optimizer_steps: optimizer.state().step,
    metrics,
    created_at: new Date().toISOString(),
  });
  return { metrics };
}
