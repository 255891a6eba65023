/**
 * The shape of a Hugging Face causal language model, read from its `config.json`: the Llama
 * family (`LlamaForCausalLM`) and Qwen3 (`Qwen3ForCausalLM`), with their rotary embedding variants.
 */

/** Architectures the engine computes. */
export const SUPPORTED_ARCHITECTURES = ['LlamaForCausalLM', 'Qwen3ForCausalLM'] as const;

/** One of {@link SUPPORTED_ARCHITECTURES}. */
export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/** How rotary frequencies are scaled (`rope_scaling` of the config). */
export type RopeScaling =
  | { readonly type: 'default' }
  | { readonly type: 'linear'; readonly factor: number }
  | {
      readonly type: 'llama3';
      readonly factor: number;
      readonly lowFrequencyFactor: number;
      readonly highFrequencyFactor: number;
      readonly originalContext: number;
    };

/** The numbers the forward pass needs, normalised from a `config.json`. */
export interface HfModelConfig {
  readonly architecture: Architecture;
  readonly vocabularySize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly layerCount: number;
  readonly headCount: number;
  readonly keyValueHeadCount: number;
  readonly headDimension: number;
  readonly rmsNormEpsilon: number;
  readonly ropeTheta: number;
  readonly ropeScaling: RopeScaling;
  /** Longest sequence (prompt + completion) the engine runs: `max_position_embeddings`. */
  readonly contextLength: number;
  /** The output projection is the token embedding (`tie_word_embeddings`). */
  readonly tiedEmbeddings: boolean;
  /** Qwen3's RMSNorm of each head's queries and keys before the rotation. */
  readonly queryKeyNorm: boolean;
  /** q/k/v/o projections carry biases (`attention_bias`). */
  readonly attentionBias: boolean;
}

function field(config: Record<string, unknown>, name: string, where: string): number {
  const value = config[name];
  if (typeof value !== 'number' || !Number.isFinite(value))
    throw new Error(`${where}: expected a number for "${name}", got ${JSON.stringify(value)}.`);
  return value;
}

function optionalNumber(config: Record<string, unknown>, name: string): number | undefined {
  const value = config[name];
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function ropeScalingOf(config: Record<string, unknown>, where: string): RopeScaling {
  // transformers 4.x writes `rope_scaling`; newer versions `rope_parameters` (with `rope_theta` in it).
  const raw = (config['rope_scaling'] ?? config['rope_parameters'] ?? null) as Record<string, unknown> | null;
  if (raw === null || typeof raw !== 'object') return { type: 'default' };
  const type = raw['rope_type'] ?? raw['type'] ?? 'default';
  if (type === 'default') return { type: 'default' };
  if (type === 'linear') return { type: 'linear', factor: field(raw, 'factor', `${where} rope_scaling`) };
  if (type === 'llama3')
    return {
      type: 'llama3',
      factor: field(raw, 'factor', `${where} rope_scaling`),
      lowFrequencyFactor: field(raw, 'low_freq_factor', `${where} rope_scaling`),
      highFrequencyFactor: field(raw, 'high_freq_factor', `${where} rope_scaling`),
      originalContext: field(raw, 'original_max_position_embeddings', `${where} rope_scaling`),
    };
  throw new Error(
    `${where}: rope_scaling type ${JSON.stringify(type)} is not supported: expected none, "linear" or "llama3".`,
  );
}

/**
 * Normalises a parsed `config.json`. Throws an Error naming the architecture when it is not one of
 * {@link SUPPORTED_ARCHITECTURES}, or the field when one is missing.
 */
export function parseHfConfig(config: Record<string, unknown>, where = 'config.json'): HfModelConfig {
  const architectures = config['architectures'];
  const architecture = Array.isArray(architectures) ? architectures[0] : undefined;
  if (typeof architecture !== 'string' || !(SUPPORTED_ARCHITECTURES as readonly string[]).includes(architecture)) {
    const named =
      typeof architecture === 'string' ? architecture : `model_type ${JSON.stringify(config['model_type'])}`;
    throw new Error(
      `${where}: architecture ${named} is not supported: the engine computes ${SUPPORTED_ARCHITECTURES.join(' and ')}.`,
    );
  }
  const hiddenSize = field(config, 'hidden_size', where);
  const headCount = field(config, 'num_attention_heads', where);
  const keyValueHeadCount = optionalNumber(config, 'num_key_value_heads') ?? headCount;
  if (headCount % keyValueHeadCount !== 0)
    throw new Error(
      `${where}: num_attention_heads ${headCount} is not a multiple of num_key_value_heads ${keyValueHeadCount}.`,
    );
  const ropeParameters = (config['rope_parameters'] ?? {}) as Record<string, unknown>;
  return {
    architecture: architecture as Architecture,
    vocabularySize: field(config, 'vocab_size', where),
    hiddenSize,
    intermediateSize: field(config, 'intermediate_size', where),
    layerCount: field(config, 'num_hidden_layers', where),
    headCount,
    keyValueHeadCount,
    headDimension: optionalNumber(config, 'head_dim') ?? hiddenSize / headCount,
    rmsNormEpsilon: optionalNumber(config, 'rms_norm_eps') ?? 1e-6,
    ropeTheta: optionalNumber(config, 'rope_theta') ?? optionalNumber(ropeParameters, 'rope_theta') ?? 10000,
    ropeScaling: ropeScalingOf(config, where),
    contextLength: optionalNumber(config, 'max_position_embeddings') ?? 2048,
    tiedEmbeddings: config['tie_word_embeddings'] === true,
    queryKeyNorm: architecture === 'Qwen3ForCausalLM',
    attentionBias: config['attention_bias'] === true,
  };
}

/**
 * Inverse rotary frequencies `[headDimension / 2]`, computed in float32 as transformers does
 * (with the `llama3` and `linear` scalings).
 */
export function inverseFrequencies(config: HfModelConfig): Float32Array {
  const dimension = config.headDimension;
  const half = dimension / 2;
  const result = new Float32Array(half);
  for (let index = 0; index < half; index += 1)
    result[index] = Math.fround(1 / Math.fround(config.ropeTheta ** Math.fround((2 * index) / dimension)));
  const scaling = config.ropeScaling;
  if (scaling.type === 'linear') {
    for (let index = 0; index < half; index += 1)
      result[index] = Math.fround((result[index] as number) / scaling.factor);
  } else if (scaling.type === 'llama3') {
    const lowWavelength = scaling.originalContext / scaling.lowFrequencyFactor;
    const highWavelength = scaling.originalContext / scaling.highFrequencyFactor;
    for (let index = 0; index < half; index += 1) {
      const frequency = result[index] as number;
      const wavelength = (2 * Math.PI) / frequency;
      let scaled = wavelength > lowWavelength ? frequency / scaling.factor : frequency;
      if (!(wavelength < highWavelength) && !(wavelength > lowWavelength)) {
        const smooth =
          (scaling.originalContext / wavelength - scaling.lowFrequencyFactor) /
          (scaling.highFrequencyFactor - scaling.lowFrequencyFactor);
        scaled = ((1 - smooth) * scaled) / scaling.factor + smooth * scaled;
      }
      result[index] = Math.fround(scaled);
    }
  }
  return result;
}

/**
 * Cosine and sine tables `[positions.length, headDimension]` (each frequency twice, as
 * transformers' `cat(freqs, freqs)`), for the given absolute positions.
 */
export function rotaryTables(
  config: HfModelConfig,
  frequencies: Float32Array,
  positions: ArrayLike<number>,
): { cos: Float32Array; sin: Float32Array } {
  const dimension = config.headDimension;
  const half = dimension / 2;
  const cos = new Float32Array(positions.length * dimension);
  const sin = new Float32Array(positions.length * dimension);
  for (let row = 0; row < positions.length; row += 1) {
    const position = positions[row] as number;
    for (let index = 0; index < half; index += 1) {
      const angle = Math.fround(position * (frequencies[index] as number));
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      cos[row * dimension + index] = c;
      cos[row * dimension + half + index] = c;
      sin[row * dimension + index] = s;
      sin[row * dimension + half + index] = s;
    }
  }
  return { cos, sin };
}
