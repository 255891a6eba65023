/**
 * The Tinker wire as the official SDK speaks it, pinned by real captured exchanges: the protobuf
 * bodies SkyRL sent are decoded through the client into the right tokens and logprobs, and the
 * forward_backward request the client encodes is the SDK's, byte for byte. Then what the captures
 * do not show: chunking at the server's limits and zstd compression of forward_backward bodies.
 */
import zlib from 'node:zlib';
import { fromBinary } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TinkerDatum } from '../../src/backends/tinker/index.js';
import { ForwardBackwardRequestSchema } from '../../src/backends/tinker/proto/tinker_public_pb.js';
import { fakeTinker, forwardBackwardOutput, future, json, openClient, protobuf } from './fake-tinker.js';
import type { WireRequest } from './fake-tinker.js';
import {
  CREATE_MODEL_REQUEST,
  CREATE_MODEL_RESULT,
  FORWARD_BACKWARD_OUTPUT_BASE64,
  FORWARD_BACKWARD_OUTPUT_VIEW,
  FORWARD_BACKWARD_REQUEST_BASE64,
  FORWARD_BACKWARD_REQUEST_VIEW,
  FORWARD_OUTPUT_BASE64,
  FORWARD_OUTPUT_VIEW,
  OPTIM_STEP_REQUEST,
  OPTIM_STEP_RESULT,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE_BASE64,
  SAMPLE_RESPONSE_VIEW,
  SAVE_WEIGHTS_FOR_SAMPLER_RESULT,
} from './wire-examples.js';

// Readers of the capture's JSON view, written with Buffer so that they share no code with the client.
const bytes = (base64: string) => new Uint8Array(Buffer.from(base64, 'base64'));
const int32s = (base64: string) => {
  const buffer = Buffer.from(base64, 'base64');
  return Array.from({ length: buffer.length / 4 }, (_, index) => buffer.readInt32LE(index * 4));
};
const int64s = (base64: string) => {
  const buffer = Buffer.from(base64, 'base64');
  return Array.from({ length: buffer.length / 8 }, (_, index) => Number(buffer.readBigInt64LE(index * 8)));
};
const float32s = (base64: string) => {
  const buffer = Buffer.from(base64, 'base64');
  return Array.from({ length: buffer.length / 4 }, (_, index) => buffer.readFloatLE(index * 4));
};

const capturedDatum = FORWARD_BACKWARD_REQUEST_VIEW.data[0]!;
/** The datum the SDK sent, as a client caller gives it. */
const DATUM: TinkerDatum = {
  inputTokens: int32s(capturedDatum.model_input[0]!.encoded_text.tokens),
  targetTokens: int64s(capturedDatum.loss_fn_inputs.target_tokens.dense),
  weights: float32s(capturedDatum.loss_fn_inputs.weights.dense),
};
const MODEL = FORWARD_BACKWARD_REQUEST_VIEW.model_id;

/** A server that accepts every call as future `n` and answers each future from `results`. */
function capturedServer(results: Record<string, () => Response>, flags: Record<string, unknown> = {}) {
  let nextId = 0;
  const kinds = new Map<string, string>();
  return fakeTinker((request) => {
    if (request.route === 'retrieve_future') {
      const kind = kinds.get(String(request.json()['request_id']));
      const answer = kind === undefined ? undefined : results[kind];
      return answer ? answer() : json({ detail: `no result scripted for ${kind}` }, 400);
    }
    nextId += 1;
    kinds.set(String(nextId), request.route);
    return future(String(nextId));
  }, flags);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('the captured exchanges (tinker 0.25.0 SDK -> SkyRL 0.4.0)', () => {
  it('the sample result decodes into the sampled tokens, their logprobs and the stop reason', async () => {
    expect(int32s(SAMPLE_RESPONSE_VIEW.sequences[0]!.tokens)).toEqual([174, 266, 30, 255, 198, 270, 270, 1]);
    const server = capturedServer({ asample: () => protobuf(bytes(SAMPLE_RESPONSE_BASE64)) });
    const client = await openClient(server);
    const result = await client.sample(SAMPLE_REQUEST.sampling_session_id, {
      promptTokens: SAMPLE_REQUEST.prompt.chunks[0]!.tokens,
      numSamples: SAMPLE_REQUEST.num_samples,
      maxTokens: SAMPLE_REQUEST.sampling_params.max_tokens,
      seed: SAMPLE_REQUEST.sampling_params.seed,
    });
    expect(result.sequences).toEqual(
      SAMPLE_RESPONSE_VIEW.sequences.map((sequence) => ({
        tokens: int32s(sequence.tokens),
        logprobs: float32s(sequence.logprobs),
        stopReason: 'length',
      })),
    );
    expect(result.promptLogprobs).toBeUndefined();
    await client.close();
  });

  it('the sample request carries what the SDK sent, and its future is asked for protobuf', async () => {
    const server = capturedServer({ asample: () => protobuf(bytes(SAMPLE_RESPONSE_BASE64)) });
    const client = await openClient(server);
    await client.sample(SAMPLE_REQUEST.sampling_session_id, {
      promptTokens: SAMPLE_REQUEST.prompt.chunks[0]!.tokens,
      numSamples: SAMPLE_REQUEST.num_samples,
      maxTokens: SAMPLE_REQUEST.sampling_params.max_tokens,
      seed: SAMPLE_REQUEST.sampling_params.seed,
    });
    const [submitted] = server.to('asample');
    // seq_id is the client's own counter (the SDK's sampler starts at 0); every other field is the SDK's.
    const { seq_id: _, ...rest } = SAMPLE_REQUEST;
    expect(submitted?.json()).toMatchObject(rest);
    const [poll] = server.to('retrieve_future');
    expect(poll?.headers.get('accept')).toBe('application/x-protobuf');
    expect(poll?.headers.get('x-tinker-request-type')).toBe('Sample');
    await client.close();
  });

  it('the forward_backward request is the bytes the SDK sent for the same datum', async () => {
    const server = capturedServer({ forward_backward: () => protobuf(bytes(FORWARD_BACKWARD_OUTPUT_BASE64)) });
    const client = await openClient(server);
    await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    const [submitted] = server.to('forward_backward');
    expect(submitted?.headers.get('content-type')).toBe('application/x-protobuf');
    expect(submitted?.headers.get('content-encoding')).toBeNull();
    expect(Buffer.from(submitted?.body ?? []).toString('base64')).toBe(FORWARD_BACKWARD_REQUEST_BASE64);
    await client.close();
  });

  it('the forward_backward output decodes into each target token logprob and loss', async () => {
    const server = capturedServer({ forward_backward: () => protobuf(bytes(FORWARD_BACKWARD_OUTPUT_BASE64)) });
    const client = await openClient(server);
    const result = await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    const fields = FORWARD_BACKWARD_OUTPUT_VIEW.loss_fn_outputs[0]!.fields;
    expect(result.outputs).toEqual([
      { logprobs: float32s(fields.logprobs.data), elementwiseLoss: float32s(fields.elementwise_loss.data) },
    ]);
    expect(result.outputs[0]?.logprobs).toHaveLength(DATUM.targetTokens.length);
    expect(result.outputs[0]?.logprobs[0]).toBeCloseTo(-9.915083, 5);
    // SkyRL sends no metrics (no loss:sum).
    expect(result.metrics).toEqual({});
    const [poll] = server.to('retrieve_future');
    expect(poll?.headers.get('accept')).toBe('application/x-protobuf');
    expect(poll?.headers.get('x-tinker-request-type')).toBe('ForwardBackward');
    await client.close();
  });

  it('a forward-only call goes to forward_backward with forward_only set and reads its protobuf output', async () => {
    const server = capturedServer({ forward_backward: () => protobuf(bytes(FORWARD_OUTPUT_BASE64)) });
    const client = await openClient(server);
    const result = await client.forwardBackward(MODEL, [DATUM], 'cross_entropy', { forwardOnly: true });
    const sent = fromBinary(ForwardBackwardRequestSchema, server.to('forward_backward')[0]?.body ?? new Uint8Array());
    expect(sent.forwardOnly).toBe(true);
    expect(server.to('retrieve_future')[0]?.headers.get('x-tinker-request-type')).toBe('Forward');
    expect(result.outputs[0]?.logprobs).toEqual(float32s(FORWARD_OUTPUT_VIEW.loss_fn_outputs[0]!.fields.logprobs.data));
    await client.close();
  });

  it('create_model, then optim_step after that forward_backward, send the SDK JSON bodies', async () => {
    const server = capturedServer({
      create_model: () => json(CREATE_MODEL_RESULT),
      forward_backward: () => protobuf(bytes(FORWARD_BACKWARD_OUTPUT_BASE64)),
      optim_step: () => json(OPTIM_STEP_RESULT),
      save_weights_for_sampler: () => json(SAVE_WEIGHTS_FOR_SAMPLER_RESULT),
    });
    const client = await openClient(server);
    const lora = CREATE_MODEL_REQUEST.lora_config;
    const modelId = await client.createModel(CREATE_MODEL_REQUEST.base_model, { rank: lora.rank, seed: lora.seed });
    expect(modelId).toBe(MODEL);
    expect(server.to('create_model')[0]?.json()).toEqual({ ...CREATE_MODEL_REQUEST, session_id: 'session_1' });

    await client.forwardBackward(modelId, [DATUM], 'cross_entropy');
    const metrics = await client.optimStep(modelId, { learningRate: OPTIM_STEP_REQUEST.adam_params.learning_rate });
    expect(server.to('optim_step')[0]?.json()).toEqual(OPTIM_STEP_REQUEST);
    expect(metrics).toEqual(OPTIM_STEP_RESULT.metrics);

    const path = await client.saveWeightsForSampler(modelId, 'step2');
    expect(path).toBe('tinker://model_3b1f728c/step2');
    expect(server.to('save_weights_for_sampler')[0]?.json()).toEqual({
      model_id: MODEL,
      path: 'step2',
      seq_id: 3,
      type: 'save_weights_for_sampler',
    });
    await client.close();
  });

  it('a sample result in JSON (a server that ignores Accept) is refused with a clear error', async () => {
    const server = capturedServer({ asample: () => json({ sequences: [] }) });
    const client = await openClient(server);
    await expect(client.sample('sampling_1', { promptTokens: [1, 2], numSamples: 1, maxTokens: 4 })).rejects.toThrow(
      /Tinker sample: expected a protobuf result, got JSON/,
    );
    await client.close();
  });
});

/** Datum `index` of a batch: recognisable tokens, `length` of them, cross_entropy inputs. */
function datum(index: number, length = 3): TinkerDatum {
  const tokens = Array.from({ length }, (_, position) => 100 * index + position);
  return { inputTokens: tokens, targetTokens: tokens.map((token) => token + 1), weights: tokens.map(() => 1) };
}

/**
 * A server that answers each forward_backward chunk with logprobs naming its datums (minus the
 * first input token of each, minus 0.5). When `reverse` is the number of chunks expected, their
 * futures resolve in reverse order of submission.
 */
function chunkServer(
  flags: Record<string, unknown>,
  options: { reverse?: number; metricsOf?: (chunk: number) => Record<string, number> } = {},
) {
  const chunks: WireRequest[] = [];
  const answered: number[] = [];
  const released = new Map<number, () => void>();
  const server = fakeTinker(async (request) => {
    if (request.route === 'forward_backward') {
      chunks.push(request);
      return future(String(chunks.length));
    }
    const id = Number(request.json()['request_id']);
    const chunk = chunks[id - 1];
    if (!chunk) return json({ detail: 'unknown future' }, 400);
    // The last chunk answers first; each earlier one waits for the one after it.
    // (A chunk that never comes releases the wait after a while, so that a wrong split fails rather than hangs.)
    if (options.reverse !== undefined && id < options.reverse)
      await new Promise<void>((resolve) => {
        released.set(id, resolve);
        setTimeout(resolve, 1_000);
      });
    answered.push(id);
    released.get(id - 1)?.();
    const sent = fromBinary(ForwardBackwardRequestSchema, chunk.body);
    const rows = sent.data.map((item) => {
      const tokens =
        item.modelInput[0]?.chunk.case === 'encodedText' ? item.modelInput[0].chunk.value.tokens : undefined;
      return [-(Buffer.from(tokens ?? []).readInt32LE(0) + 0.5)];
    });
    return protobuf(forwardBackwardOutput(rows, options.metricsOf?.(id)));
  }, flags);
  return { server, chunks, answered };
}

describe('forward_backward in chunks at the server limits', () => {
  it('splits at fwdbwd_max_chunk_len, submits the chunks in seq_id order and reassembles the outputs in order', async () => {
    const { server, chunks, answered } = chunkServer({ fwdbwd_max_chunk_len: 2 }, { reverse: 3 });
    const client = await openClient(server);
    const data = [0, 1, 2, 3, 4].map((index) => datum(index));
    const result = await client.forwardBackward('model_1', data, 'cross_entropy');
    const sent = chunks.map((chunk) => fromBinary(ForwardBackwardRequestSchema, chunk.body));
    expect(sent.map((request) => request.seqId)).toEqual([1, 2, 3]);
    expect(sent.map((request) => request.data.length)).toEqual([2, 2, 1]);
    expect(answered).toEqual([3, 2, 1]);
    expect(result.outputs.map((output) => output.logprobs)).toEqual([[-0.5], [-100.5], [-200.5], [-300.5], [-400.5]]);
    await client.close();
  });

  it('splits at fwdbwd_max_chunk_bytes_count with the SDK estimate (10 bytes per token and per loss input value)', async () => {
    // A cross_entropy datum of 10 tokens: 10 x (10 inputs + 10 targets + 10 weights) = 300 estimated bytes.
    const { server, chunks } = chunkServer({ fwdbwd_max_chunk_bytes_count: 600 });
    const client = await openClient(server);
    const data = [0, 1, 2, 3, 4].map((index) => datum(index, 10));
    const result = await client.forwardBackward('model_1', data, 'cross_entropy');
    const sent = chunks.map((chunk) => fromBinary(ForwardBackwardRequestSchema, chunk.body));
    expect(sent.map((request) => request.data.length)).toEqual([2, 2, 1]);
    expect(result.outputs).toHaveLength(5);
    await client.close();
  });

  it('a single datum larger than the byte limit still goes, alone', async () => {
    const { server, chunks } = chunkServer({ fwdbwd_max_chunk_bytes_count: 10 });
    const client = await openClient(server);
    await client.forwardBackward('model_1', [datum(0), datum(1)], 'cross_entropy');
    expect(chunks.map((chunk) => fromBinary(ForwardBackwardRequestSchema, chunk.body).data.length)).toEqual([1, 1]);
    await client.close();
  });

  it('combines the chunks metrics as the SDK does: sums add up, means are weighted by datums', async () => {
    const metrics: Record<number, Record<string, number>> = {
      1: { 'loss:sum': 1.5, 'clip_fraction:mean': 0.5, 'ratio:max': 1.2 },
      2: { 'loss:sum': 2, 'clip_fraction:mean': 0.2, 'ratio:max': 1.7 },
    };
    const { server } = chunkServer({ fwdbwd_max_chunk_len: 2 }, { metricsOf: (chunk) => metrics[chunk] ?? {} });
    const client = await openClient(server);
    const result = await client.forwardBackward('model_1', [datum(0), datum(1), datum(2)], 'cross_entropy');
    expect(result.metrics['loss:sum']).toBeCloseTo(3.5, 6);
    expect(result.metrics['clip_fraction:mean']).toBeCloseTo((0.5 * 2 + 0.2 * 1) / 3, 6);
    expect(result.metrics['ratio:max']).toBeCloseTo(1.7, 6);
    await client.close();
  });
});

describe('zstd compression of forward_backward bodies (proto_compress_fwdbwd)', () => {
  const nodeHasZstd = typeof (zlib as { zstdCompressSync?: unknown }).zstdCompressSync === 'function';

  function zstdServer(flags: Record<string, unknown>) {
    return capturedServer({ forward_backward: () => protobuf(bytes(FORWARD_BACKWARD_OUTPUT_BASE64)) }, flags);
  }

  it.runIf(nodeHasZstd)('with zlib zstd: the body is zstd with Content-Encoding: zstd, and no warning', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const server = zstdServer({ proto_compress_fwdbwd: true });
    const client = await openClient(server);
    await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    const [submitted] = server.to('forward_backward');
    expect(submitted?.headers.get('content-encoding')).toBe('zstd');
    const decompress = (zlib as unknown as { zstdDecompressSync: (input: Uint8Array) => Buffer }).zstdDecompressSync;
    expect(decompress(submitted?.body ?? new Uint8Array()).toString('base64')).toBe(FORWARD_BACKWARD_REQUEST_BASE64);
    expect(warn).not.toHaveBeenCalled();
    await client.close();
  });

  it.runIf(!nodeHasZstd)('without zlib zstd (Node 20): one process warning, then uncompressed bodies', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const server = zstdServer({ proto_compress_fwdbwd: true });
    const client = await openClient(server);
    await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0]?.[0])).toMatch(/proto_compress_fwdbwd.*no zlib zstd.*uncompressed/);
    expect(warn.mock.calls[0]?.[1]).toMatchObject({ code: 'POLICYLOOP_TINKER_NO_ZSTD' });
    const [first] = server.to('forward_backward');
    expect(first?.headers.get('content-encoding')).toBeNull();
    expect(Buffer.from(first?.body ?? []).toString('base64')).toBe(FORWARD_BACKWARD_REQUEST_BASE64);
    await client.close();
  });

  it('when the server does not ask for it, bodies go uncompressed and nothing is said', async () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const server = zstdServer({ proto_compress_fwdbwd: false });
    const client = await openClient(server);
    await client.forwardBackward(MODEL, [DATUM], 'cross_entropy');
    expect(server.to('forward_backward')[0]?.headers.get('content-encoding')).toBeNull();
    expect(warn).not.toHaveBeenCalled();
    await client.close();
  });
});
