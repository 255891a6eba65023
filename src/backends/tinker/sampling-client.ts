/**
 * The sampling calls of the Tinker API (what the SDK's `SamplingClient` does for one sampling
 * session, here for every session by its id): opening a sampling session on a base model or on
 * saved sampler weights, and sampling token prompts in it (`asample`, results as protobuf).
 */
import { StopReason } from './proto/tinker_public_pb.js';
import type { SampleResponse } from './proto/tinker_public_pb.js';
import { stringOrUndefined } from './http.js';
import type { TinkerSession } from './session.js';
import { readFloat32, readInt32 } from './tensors.js';
import type { SampleParams, SubmitOptions, TinkerSampleResult } from './types.js';

/** The `sampling_params` of a sample request. */
function samplingParams(params: SampleParams) {
  return {
    max_tokens: params.maxTokens,
    seed: params.seed ?? null,
    temperature: params.temperature ?? 1,
    top_k: params.topK ?? -1,
    top_p: params.topP ?? 1,
    stop:
      params.stopTokens && params.stopTokens.length > 0
        ? [...params.stopTokens]
        : params.stop && params.stop.length > 0
          ? [...params.stop]
          : null,
  };
}

/**
 * The sampling sessions of one session.
 * @example
 * const sampling = new TinkerSamplingClient(session);
 * const id = await sampling.createSamplingSession({ baseModel: 'Qwen/Qwen3-8B' });
 * const { sequences } = await sampling.sample(id, { promptTokens: [1, 2, 3], numSamples: 1, maxTokens: 16 });
 */
export class TinkerSamplingClient {
  private readonly seqIds = new Map<string, number>();

  /** @param session The session the sampling sessions belong to. */
  constructor(private readonly session: TinkerSession) {}

  /** Opens a sampling session on a base model or on saved sampler weights (`tinker://…`). */
  async createSamplingSession(
    source: { baseModel: string } | { modelPath: string },
    options: SubmitOptions = {},
  ): Promise<string> {
    const answer = (await this.session.http.json(
      'POST',
      'create_sampling_session',
      {
        session_id: this.session.id,
        sampling_session_seq_id: this.session.nextSamplingSessionSeq(),
        ...('baseModel' in source ? { base_model: source.baseModel } : { model_path: source.modelPath }),
        type: 'create_sampling_session',
      },
      options,
    )) as { sampling_session_id?: unknown };
    const id = stringOrUndefined(answer.sampling_session_id);
    if (id === undefined) throw new Error('Tinker create_sampling_session answered without a sampling_session_id.');
    return id;
  }

  /** Samples `numSamples` continuations of a token prompt in a sampling session. */
  async sample(
    samplingSessionId: string,
    params: SampleParams,
    options: SubmitOptions = {},
  ): Promise<TinkerSampleResult> {
    const seqId = (this.seqIds.get(samplingSessionId) ?? 0) + 1;
    this.seqIds.set(samplingSessionId, seqId);
    const body = {
      sampling_session_id: samplingSessionId,
      seq_id: seqId,
      num_samples: params.numSamples,
      prompt: { chunks: [{ tokens: [...params.promptTokens], type: 'encoded_text' }] },
      sampling_params: samplingParams(params),
      prompt_logprobs: params.promptLogprobs ?? false,
      topk_prompt_logprobs: 0,
      type: 'sample',
    };
    const result = (await this.session.call(
      { operation: 'sample', requestType: 'Sample', build: () => ({ json: body }), asample: true },
      options,
    )) as SampleResponse;
    return {
      sequences: result.sequences.map((sequence) => ({
        tokens: readInt32(sequence.tokens, 'sampled tokens'),
        logprobs: sequence.logprobs ? readFloat32(sequence.logprobs, 'sampled logprobs') : [],
        stopReason: sequence.stopReason === StopReason.LENGTH ? 'length' : 'stop',
      })),
      promptLogprobs: result.promptLogprobs ? readFloat32(result.promptLogprobs, 'prompt logprobs') : undefined,
    };
  }
}
