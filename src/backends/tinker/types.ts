/**
 * The data of the Tinker API as this client hands it over: LoRA settings, training examples and
 * their outputs, Adam settings, sampling requests and results, and checkpoints. Shared by the
 * service, training, sampling and REST pieces of the client.
 */

/** LoRA settings of a training model. */
export interface LoraSettings {
  readonly rank: number;
  readonly seed?: number | undefined;
  readonly trainMlp?: boolean | undefined;
  readonly trainAttn?: boolean | undefined;
  readonly trainUnembed?: boolean | undefined;
}

/** One training example: the model's input tokens and the loss function's per-token inputs. */
export interface TinkerDatum {
  /** Input token ids (the sequence without its last token). */
  readonly inputTokens: readonly number[];
  /** Next-token targets, one per input token. */
  readonly targetTokens: readonly number[];
  /** `cross_entropy`: weight of each target (0 for prompt tokens). */
  readonly weights?: readonly number[] | undefined;
  /** RL losses: the sampler's logprob of each target (0 where not learned). */
  readonly logprobs?: readonly number[] | undefined;
  /** RL losses: the advantage of each target (0 where not learned). */
  readonly advantages?: readonly number[] | undefined;
}

/** What one datum's forward (or forward/backward) gave back. */
export interface TinkerDatumOutput {
  /** The model's logprob of each target token. */
  readonly logprobs: number[];
  /** The loss of each target token, when the server gives it. */
  readonly elementwiseLoss: number[] | undefined;
}

/** A forward/backward result. */
export interface ForwardBackwardResult {
  readonly outputs: TinkerDatumOutput[];
  /** The server's metrics (hosted Tinker: `loss:sum`; SkyRL: none), combined over the chunks as the SDK does. */
  readonly metrics: Record<string, number>;
}

/** Adam settings of one optimizer step. */
export interface AdamParams {
  readonly learningRate: number;
  readonly beta1?: number | undefined;
  readonly beta2?: number | undefined;
  readonly eps?: number | undefined;
  readonly weightDecay?: number | undefined;
  readonly gradClipNorm?: number | undefined;
}

/** What a sampling request asks for. */
export interface SampleParams {
  readonly promptTokens: readonly number[];
  readonly numSamples: number;
  readonly maxTokens: number;
  readonly temperature?: number | undefined;
  readonly topP?: number | undefined;
  readonly topK?: number | undefined;
  readonly seed?: number | undefined;
  /** Stop strings (the server stops at the first; it may keep them in the tokens). */
  readonly stop?: readonly string[] | undefined;
  /** Stop token ids (end-of-turn tokens). */
  readonly stopTokens?: readonly number[] | undefined;
  /** Ask for the logprob of every prompt token (the reference checks use it). */
  readonly promptLogprobs?: boolean | undefined;
}

/** One sampled sequence. */
export interface TinkerSequence {
  readonly tokens: number[];
  /** The sampler's logprob of each token (empty when the server sent none). */
  readonly logprobs: number[];
  readonly stopReason: 'stop' | 'length';
}

/** A sampling result. */
export interface TinkerSampleResult {
  readonly sequences: TinkerSequence[];
  /** Logprobs of the prompt tokens, when asked (SkyRL gives n-1 values for n tokens, hosted Tinker n with a leading null). */
  readonly promptLogprobs: number[] | undefined;
}

/** A checkpoint on the server. */
export interface TinkerCheckpoint {
  readonly checkpointId: string;
  readonly checkpointType: string;
  readonly tinkerPath: string;
  readonly time: string | null;
  /** Its size in bytes, when the server says (hosted Tinker; SkyRL 0.4.0 does not). */
  readonly sizeBytes?: number | null | undefined;
  /** When the server deletes it (ISO 8601); null: never, or the server does not say. */
  readonly expiresAt?: string | null | undefined;
}

/** A training run (a training model) on the server. */
export interface TinkerTrainingRun {
  readonly trainingRunId: string;
  readonly baseModel: string;
  /** Its LoRA rank, when the server says. */
  readonly loraRank: number | null;
  /** When it was last used (ISO 8601), when the server says. */
  readonly lastRequestTime: string | null;
}

/** What every call of the client takes. */
export interface SubmitOptions {
  /** Aborts the call. */
  readonly signal?: AbortSignal | undefined;
}
