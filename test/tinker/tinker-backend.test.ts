/**
 * TinkerBackend against a real Tinker server: SkyRL 0.4.0's, on loopback, for a tiny Qwen3 folder
 * with the real Qwen3 tokenizer (test/support/skyrl-server.ts). The official tinker 0.25.0 SDK is
 * the reference for the logprobs policyloop records.
 *
 * Skips with one line saying why without a Python >= 3.12, unless POLICYLOOP_REQUIRE_TINKER=1 (CI).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';
import path from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  APIConnectionError,
  RLTrainer,
  TinkerBackend,
  TinkerFutureTimeoutError,
  TrainableModel,
  TrainingJobFailedError,
  gatherTrajectoryGroups,
} from 'policyloop';
import type { Choice, TrajectoryGroup } from 'policyloop/schema';
import { combineResults } from '../../src/backends/tinker/forward-backward.js';
import {
  ForwardBackwardOutputSchema,
  ForwardBackwardRequestSchema,
} from '../../src/backends/tinker/proto/tinker_public_pb.js';
import { TinkerClient } from '../../src/backends/tinker/tinker-client.js';
import { readFloat32, readInt32, readInt64 } from '../../src/backends/tinker/tensors.js';
import { writeTinyQwen3 } from '../../src/engine/hf/tiny-qwen3.js';
import { loadTextLayer } from '../../src/text/text-layer.js';
import { runSdkReference, type SkyrlServer, skyrlSkipReason, startSkyrlServer } from '../support/skyrl-server.js';

const MINUTE = 60_000;
const execFileAsync = promisify(execFile);
const skipReason = await skyrlSkipReason();
if (skipReason !== undefined) console.log(`Tinker suite skipped: ${skipReason}`);

const WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'weather',
    description: 'The weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

/** A `fetch` that records the Tinker requests it passes on (route and body), and can hold some. */
function recordingFetch(hold?: (route: string) => boolean) {
  const requests: { route: string; body: Uint8Array | string | undefined; at: number }[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const route = url.replace(/^.*\/api\/v1\//, '');
    const body = init?.body;
    requests.push({
      route,
      body: body instanceof Uint8Array ? body : typeof body === 'string' ? body : undefined,
      at: Date.now(),
    });
    if (hold?.(route)) {
      // A future that never resolves: wait until the client gives up on the request.
      await new Promise((_, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true }),
      );
    }
    return globalThis.fetch(input, init);
  };
  return { fetch, requests };
}

/**
 * A `fetch` that keeps every forward_backward request (not the forward-only ones) and the protobuf
 * result of each ForwardBackward future, for a test to read what the server computed.
 */
function forwardBackwardCapture() {
  const requests: Uint8Array[] = [];
  const results: Uint8Array[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const route = url.replace(/^.*\/api\/v1\//, '');
    const response = await globalThis.fetch(input, init);
    if (route === 'forward_backward' && init?.body instanceof Uint8Array) {
      if (!fromBinary(ForwardBackwardRequestSchema, init.body).forwardOnly) requests.push(init.body);
    }
    const type = new Headers(init?.headers).get('x-tinker-request-type');
    if (route === 'retrieve_future' && type === 'ForwardBackward' && response.ok) {
      if ((response.headers.get('content-type') ?? '').includes('protobuf'))
        results.push(new Uint8Array(await response.clone().arrayBuffer()));
    }
    return response;
  };
  return { fetch, requests, results };
}

/** One learned or prompt target of a forward_backward: what was sent and what the server gave back. */
interface TargetRecord {
  /** The sampler's logprob sent (`logprobs`). */
  readonly sampled: number;
  readonly advantage: number;
  /** The training model's logprob now, from the server. */
  readonly current: number;
  /** The server's loss of this target. */
  readonly loss: number;
}

/** The targets of the last captured forward_backward, and the `loss_fn` and `loss_fn_config` it was sent with. */
function lastForwardBackward(capture: ReturnType<typeof forwardBackwardCapture>) {
  const request = fromBinary(ForwardBackwardRequestSchema, capture.requests.at(-1) as Uint8Array);
  const output = combineResults(
    [fromBinary(ForwardBackwardOutputSchema, capture.results.at(-1) as Uint8Array)],
    request.data.length,
    'forward_backward',
  );
  const dense = (datum: (typeof request.data)[number], name: string): number[] => {
    const encoding = datum.lossFnInputs[name]?.encoding;
    return encoding?.case === 'dense' ? readFloat32(encoding.value) : [];
  };
  const targets: TargetRecord[] = request.data.flatMap((datum, row) => {
    const sampled = dense(datum, 'logprobs');
    const advantages = dense(datum, 'advantages');
    const result = output.outputs[row];
    return sampled.map((value, index) => ({
      sampled: value,
      advantage: advantages[index] as number,
      current: result?.logprobs[index] as number,
      loss: result?.elementwiseLoss?.[index] as number,
    }));
  });
  return { lossFn: request.lossFn, lossFnConfig: request.lossFnConfig, targets };
}

/** Tinker's `ppo` and `cispo` losses of one target at clip bounds `[low, high]` (SkyRL's loss_fns.py). */
function clippedLoss(lossFn: string, target: TargetRecord, low: number, high: number): number {
  const ratio = Math.exp(target.current - target.sampled);
  const clipped = Math.min(Math.max(ratio, low), high);
  if (lossFn === 'ppo') return -Math.min(ratio * target.advantage, clipped * target.advantage);
  return -clipped * target.current * target.advantage;
}

const TITLE = 'TinkerBackend on SkyRL';
describe.skipIf(skipReason !== undefined)(
  skipReason === undefined ? TITLE : `${TITLE} (skipped: ${skipReason})`,
  () => {
    let root: string;
    let server: SkyrlServer;
    let modelDir: string;
    const backends: TinkerBackend[] = [];

    const backendFor = (options: ConstructorParameters<typeof TinkerBackend>[0] = {}): TinkerBackend => {
      const backend = new TinkerBackend({
        baseURL: server.baseURL,
        dataDir: path.join(root, `data-${backends.length}`),
        lora: { rank: 8, seed: 0 },
        ...options,
      });
      backends.push(backend);
      return backend;
    };

    beforeAll(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-tinker-'));
      // A wider embedding than the default makes the tiny model's logits movable by a LoRA adapter.
      modelDir = await writeTinyQwen3(path.join(root, 'tiny-qwen3'), { embeddingStd: 0.15 });
      server = await startSkyrlServer({ modelDir, readyTimeoutMs: 4 * MINUTE });
    }, 40 * MINUTE);

    // Each test's backends close after it: closing unloads their training models (SkyRL holds 4).
    afterEach(async () => {
      await Promise.all(backends.map((backend) => backend.close()));
    });

    afterAll(async () => {
      await server?.close();
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    });

    it('registers a model on the base model the server trains; another base model is refused by name', async () => {
      const backend = backendFor();
      const model = new TrainableModel({ project: 'tinker', name: 'register', baseModel: modelDir });
      await model.register(backend);
      expect(model.id).toMatch(/^[0-9a-f-]{36}$/);
      const other = new TrainableModel({ project: 'tinker', name: 'other', baseModel: 'Qwen/Qwen3-8B' });
      const refusal = await other.register(backend).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      expect(refusal?.message).toContain('"Qwen/Qwen3-8B"');
      expect(refusal?.message).toContain(`The Tinker server at ${server.baseURL} trains "${modelDir}"`);
      await model.close();
    });

    it('answers chat completions with tools through model.openai(): rendered by the model template, n choices, logprobs, token ids', async () => {
      const backend = backendFor();
      const model = new TrainableModel({ project: 'tinker', name: 'chat', baseModel: modelDir });
      await model.register(backend);
      const completion = await model.openai().chat.completions.create({
        model: model.inferenceName(),
        messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
        tools: [WEATHER_TOOL],
        max_tokens: 6,
        n: 2,
        seed: 7,
        stop: ['\n\n'],
      });
      expect(completion.choices).toHaveLength(2);
      const text = await loadTextLayer(modelDir);
      const expectedPrompt = text.encode(
        text.renderChat([{ role: 'user', content: 'What is the weather in Paris?' }], {
          tools: [WEATHER_TOOL],
          addGenerationPrompt: true,
        }),
      );
      for (const choice of completion.choices as (Choice & { prompt_token_ids: number[]; token_ids: number[] })[]) {
        // The prompt the server sampled after is the chat template's rendering, tools included.
        expect(choice.prompt_token_ids).toEqual(expectedPrompt);
        expect(text.decode(choice.prompt_token_ids)).toContain('"name": "weather"');
        // At most max_tokens; fewer when the reply ended (its end token, or the stop string whose tokens are dropped).
        expect(choice.token_ids.length).toBeLessThanOrEqual(6);
        if (choice.token_ids.length < 6) expect(choice.finish_reason).toBe('stop');
        expect(choice.logprobs?.content?.map((entry) => entry.logprob)).toHaveLength(choice.token_ids.length);
        for (const entry of choice.logprobs?.content ?? []) expect(entry.logprob).toBeLessThan(0);
        expect(choice.message.content).not.toContain('\n\n');
      }
      expect(completion.usage?.prompt_tokens).toBe(expectedPrompt.length);
      await model.close();
    });

    it('records logprobs that the official SDK computes the same for the same tokens, before and after a step', async () => {
      const backend = backendFor();
      const model = new TrainableModel({ project: 'tinker', name: 'parity', baseModel: modelDir });
      await model.register(backend);
      const client = model.openai();
      const sampleOne = async () => {
        const completion = await client.chat.completions.create({
          model: model.inferenceName(),
          messages: [{ role: 'user', content: 'Name a colour.' }],
          max_tokens: 8,
          seed: 11,
        });
        return completion.choices[0] as Choice & { prompt_token_ids: number[]; token_ids: number[] };
      };
      const compare = async (choice: Awaited<ReturnType<typeof sampleOne>>, modelPath: string | undefined) => {
        const reference = await runSdkReference(server, {
          mode: 'logprobs',
          ...(modelPath ? { modelPath } : {}),
          items: [{ promptTokens: choice.prompt_token_ids, completionTokens: choice.token_ids }],
        });
        const recorded = choice.logprobs?.content?.map((entry) => entry.logprob) ?? [];
        const sdk = reference.results[0]?.completion_logprobs ?? [];
        expect(sdk).toHaveLength(recorded.length);
        const gap = Math.max(...recorded.map((value, index) => Math.abs(value - (sdk[index] as number))));
        expect(gap).toBeLessThan(1e-3);
      };
      await compare(await sampleOne(), undefined);
      const groups = await gatherTrajectoryGroups(
        [0, 1],
        async (_scenario, { signal }) => {
          await client.chat.completions.create(
            { model: model.inferenceName(), messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 6 },
            { signal },
          );
          return { reward: Math.random() };
        },
        { groupSize: 3 },
      );
      const { step } = await model.train(groups, { learningRate: 1e-3 });
      expect(step).toBe(1);
      const record = JSON.parse(
        readFileSync(path.join(stepDirectory(backend, model.id, 1), 'tinker.json'), 'utf8'),
      ) as { samplerPath: string };
      await compare(await sampleOne(), record.samplerPath);
      await model.close();
    });

    it('trains on exactly the tokens it sampled: every datum is prompt_token_ids + token_ids', async () => {
      const { fetch, requests } = recordingFetch();
      const backend = backendFor({ fetch });
      const model = new TrainableModel({ project: 'tinker', name: 'tokens', baseModel: modelDir });
      await model.register(backend);
      const client = model.openai();
      const groups: TrajectoryGroup[] = await gatherTrajectoryGroups(
        ['cat', 'dog'],
        async (word) => {
          const completion = await client.chat.completions.create({
            model: model.inferenceName(),
            messages: [{ role: 'user', content: word }],
            max_tokens: 6,
          });
          expect(completion.choices).toHaveLength(1);
          return { reward: Math.random() };
        },
        { groupSize: 4 },
      );
      const trainable = groups.filter((group) => new Set(group.trajectories.map((t) => t.reward)).size > 1);
      expect(trainable.length).toBeGreaterThan(0);
      await model.train(groups, { learningRate: 1e-3 });
      const sent = requests
        .filter((request) => request.route === 'forward_backward' && request.body instanceof Uint8Array)
        .flatMap((request) => fromBinary(ForwardBackwardRequestSchema, request.body as Uint8Array).data);
      const sampled = trainable.flatMap((group) =>
        group.trajectories.map((trajectory) => {
          const choice = trajectory.messages_and_choices.find((item) => 'message' in item) as Choice & {
            prompt_token_ids: number[];
            token_ids: number[];
          };
          return [...choice.prompt_token_ids, ...choice.token_ids];
        }),
      );
      const trained = sent.map((datum) => {
        const chunk = datum.modelInput[0]?.chunk;
        const inputs = chunk?.case === 'encodedText' ? readInt32(chunk.value.tokens) : [];
        const targetTensor = datum.lossFnInputs['target_tokens']?.encoding;
        const targets = targetTensor?.case === 'dense' ? readInt64(targetTensor.value) : [];
        return [...inputs, targets[targets.length - 1] as number];
      });
      expect(trained.map((tokens) => tokens.join(',')).sort()).toEqual(
        sampled.map((tokens) => tokens.join(',')).sort(),
      );
      await model.close();
    });

    it('runs 3 RLTrainer steps, each sampling from new sampler weights, and lists, prunes and exports checkpoints', async () => {
      const backend = backendFor();
      const model = new TrainableModel({ project: 'tinker', name: 'trainer', baseModel: modelDir });
      await model.register(backend);
      const client = model.openai();
      const sampledAt: number[] = [];
      const trainer = new RLTrainer({
        model,
        scenarios: ['cat', 'dog', 'sun'],
        rollout: async (word: string) => {
          await client.chat.completions.create({
            model: model.inferenceName(),
            messages: [{ role: 'user', content: word }],
            max_tokens: 5,
          });
        },
        reward: (trajectory) => {
          sampledAt.push(trajectory.initial_policy_version ?? -1);
          return Math.random();
        },
        groupSize: 4,
        groupsPerStep: 2,
        maxSteps: 3,
        maxStepsOffPolicy: 0, // each step's rollouts sample from the step before it
        train: { learningRate: 1e-3 },
        progress: false,
      });
      const summary = await trainer.run();
      expect(summary.step).toBe(3);
      expect(new Set(sampledAt)).toEqual(new Set([0, 1, 2]));
      const { client: training } = await backend.connect();
      const page = await training.checkpoints.list(model.id, { limit: 10 });
      expect(page.data.map((checkpoint) => checkpoint.step).sort()).toEqual([1, 2, 3]);
      const records = await Promise.all(
        [1, 2, 3].map(async (step) => {
          const file = path.join(stepDirectory(backend, model.id, step), 'tinker.json');
          return JSON.parse(readFileSync(file, 'utf8')) as {
            samplerPath: string;
            statePath: string;
            trainingModelId: string;
          };
        }),
      );
      expect(new Set(records.map((record) => record.samplerPath)).size).toBe(3);
      // The server lists each step's sampler weights and saved state.
      const tinker = new TinkerClient({ baseURL: server.baseURL, apiKey: 'tml-test' });
      const listed = await tinker.listCheckpoints(records[2]!.trainingModelId);
      expect(listed.filter((checkpoint) => checkpoint.checkpointType === 'sampler')).toHaveLength(3);
      expect(listed.filter((checkpoint) => checkpoint.checkpointType === 'training')).toHaveLength(3);
      // Retention deletes them on the server too.
      const pruned = await model.pruneCheckpoints({ keepLatest: true, keepBestBy: null });
      expect(pruned.deleted.sort()).toEqual([1, 2]);
      const after = await tinker.listCheckpoints(records[2]!.trainingModelId);
      expect(after.map((checkpoint) => checkpoint.tinkerPath).sort()).toEqual(
        [records[2]!.statePath, records[2]!.samplerPath.replace(/\/([^/]+)$/, '/sampler_weights/$1')].sort(),
      );
      // The adapter of the last step is a PEFT folder.
      const { exportTinkerCheckpoint } = await import('../../src/backends/tinker/index.js');
      const out = path.join(root, 'adapter');
      const files = await exportTinkerCheckpoint({
        checkpointDirectory: stepDirectory(backend, model.id, 3),
        out,
      });
      expect(files).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
      expect(JSON.parse(readFileSync(path.join(out, 'adapter_config.json'), 'utf8'))).toMatchObject({
        peft_type: 'LORA',
        r: 8,
      });
      await model.close();
    });

    it('trains SFT on assistant tokens with a falling loss', async () => {
      const backend = backendFor();
      const model = new TrainableModel({ project: 'tinker', name: 'sft', baseModel: modelDir });
      await model.register(backend);
      const losses: number[] = [];
      model.on('job:progress', (progress) => {
        const loss = progress.metrics['loss'];
        if (progress.event.type === 'gradient_step' && loss !== undefined) losses.push(loss);
      });
      const rows = ['Paris', 'Bern', 'Rome', 'Oslo'].map((city) => ({
        messages: [
          { role: 'user' as const, content: `Weather in ${city}?` },
          { role: 'assistant' as const, content: `It is sunny in ${city}.` },
        ],
      }));
      const result = await model.trainSFT(Array.from({ length: 10 }, () => rows).flat(), {
        learningRate: 5e-3,
        batchSize: 4,
      });
      expect(result.step).toBe(1);
      expect(losses).toHaveLength(10);
      const first = (losses[0]! + losses[1]!) / 2;
      const last = (losses[8]! + losses[9]!) / 2;
      expect(last).toBeLessThan(first * 0.7);
      await model.close();
    });

    it('stops its heartbeat when closed: no request reaches the server after close()', async () => {
      const { fetch, requests } = recordingFetch();
      const backend = backendFor({ fetch });
      const model = new TrainableModel({ project: 'tinker', name: 'close', baseModel: modelDir });
      await model.register(backend);
      await new Promise((resolve) => setTimeout(resolve, 10_500));
      expect(requests.filter((request) => request.route === 'session_heartbeat').length).toBeGreaterThanOrEqual(1);
      await model.close();
      await backend.close();
      const closedAt = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 10_500));
      expect(requests.filter((request) => request.at > closedAt)).toEqual([]);
      await expect(backend.connect()).rejects.toThrow('This TinkerBackend is closed');
    });

    it(
      'trains the quickstart agent of examples/tinker.ts unchanged, pointed at the server by TINKER_BASE_URL',
      async () => {
        const repository = path.resolve(import.meta.dirname, '../..');
        const tsx = path.join(repository, 'node_modules', 'tsx', 'dist', 'loader.mjs');
        const dataDir = path.join(root, 'example-data');
        const { stdout } = await execFileAsync(
          process.execPath,
          ['--import', tsx, path.join(repository, 'examples', 'tinker.ts')],
          {
            env: {
              ...process.env,
              NO_COLOR: '1',
              TINKER_BASE_URL: server.baseURL,
              TINKER_BASE_MODEL: modelDir,
              TINKER_STEPS: '2',
              TINKER_LORA_RANK: '8',
              TINKER_LEARNING_RATE: '1e-3',
              TINKER_DATA_DIR: dataDir,
              TSX_TSCONFIG_PATH: path.join(repository, 'tsconfig.json'),
            },
            timeout: 10 * MINUTE,
          },
        );
        expect(stdout).toContain(`training ${modelDir} on the Tinker server at ${server.baseURL}`);
        expect(stdout.match(/^step \d+: mean reward of the groups it trained on \d\.\d{3}$/gm)).toHaveLength(2);
        expect(stdout).toMatch(/^trained to step 2 \(\d+ rollouts, \d+ tokens\)$/m);
      },
      15 * MINUTE,
    );

    describe('the objective', () => {
      /** Groups sampled from the model's current weights: 2 prompts × 4 choices, random rewards. */
      const sampleGroups = (model: TrainableModel, words = ['cat', 'dog']) =>
        gatherTrajectoryGroups(
          words,
          async (word, { signal }) => {
            await model
              .openai()
              .chat.completions.create(
                { model: model.inferenceName(), messages: [{ role: 'user', content: word }], max_tokens: 8 },
                { signal },
              );
            return { reward: Math.random() };
          },
          { groupSize: 4 },
        );

      it(
        'ppo and cispo train with the clip of epsilon / epsilonHigh: the server gets them and its per-token losses apply them, not its defaults',
        async () => {
          const capture = forwardBackwardCapture();
          const backend = backendFor({ fetch: capture.fetch });
          const model = new TrainableModel({ project: 'tinker', name: 'clips', baseModel: modelDir });
          await model.register(backend);
          // Three batches sampled from the base weights; after a large first step the other two are
          // off policy, so their importance ratios stray from 1 and the clip has work to do.
          const [warmUp, forPpo, forCispo] = [
            await sampleGroups(model),
            await sampleGroups(model),
            await sampleGroups(model),
          ];
          await model.train(warmUp, { learningRate: 5e-2 });
          const low = 0.95;
          const high = 1.1;
          for (const [lossFn, groups] of [
            ['ppo', forPpo],
            ['cispo', forCispo],
          ] as const) {
            await model.train(groups, { lossFn, epsilon: 1 - low, epsilonHigh: high - 1, learningRate: 1e-3 });
            const sent = lastForwardBackward(capture);
            expect(sent.lossFn).toBe(lossFn);
            expect(sent.lossFnConfig['clip_low_threshold']).toBeCloseTo(low, 6);
            expect(sent.lossFnConfig['clip_high_threshold']).toBeCloseTo(high, 6);
            const learned = sent.targets.filter((target) => target.advantage !== 0);
            expect(learned.length).toBeGreaterThan(0);
            // The server's loss of every learned target is the clipped loss at [0.95, 1.1] ...
            for (const target of learned) {
              const expected = clippedLoss(lossFn, target, low, high);
              expect(Math.abs(target.loss - expected)).toBeLessThan(1e-4 + 1e-3 * Math.abs(expected));
            }
            // ... and for some it is not what SkyRL's default clip, [0.8, 1.2], would have given.
            const telling = learned.filter(
              (target) =>
                Math.abs(clippedLoss(lossFn, target, 0.8, 1.2) - clippedLoss(lossFn, target, low, high)) > 1e-3,
            );
            expect(telling.length).toBeGreaterThan(0);
            const outside = learned.filter((target) => {
              const ratio = Math.exp(target.current - target.sampled);
              return ratio < low || ratio > high;
            });
            console.log(
              `${lossFn} at [${low}, ${high}]: ${learned.length} learned targets, clip fraction ${(outside.length / learned.length).toFixed(3)}, ${telling.length} whose loss differs from the default clip's`,
            );
          }
          await model.close();
        },
        10 * MINUTE,
      );

      it(
        'a large klPenaltyCoef keeps the policy nearer the base model than the same run without it, and reports kl_ref',
        async () => {
          const backend = backendFor();
          // Step 1 has no penalty to speak of (the policy is the base), and Adam's momentum carries
          // its direction on; a coefficient that dominates the rewards' advantages from step 2 on,
          // and 6 steps, let the penalty show against that.
          const steps = 6;
          /** Trains `steps` steps, each on groups sampled from the step before; the reward favours even token ids. */
          const run = async (name: string, klPenaltyCoef: number | undefined) => {
            const model = new TrainableModel({ project: 'tinker', name, baseModel: modelDir });
            await model.register(backend);
            const klRef: number[] = [];
            for (let step = 0; step < steps; step += 1) {
              const groups = await gatherTrajectoryGroups(
                ['cat', 'dog'],
                async (word, { signal }) => {
                  const completion = await model
                    .openai()
                    .chat.completions.create(
                      { model: model.inferenceName(), messages: [{ role: 'user', content: word }], max_tokens: 8 },
                      { signal },
                    );
                  const tokens = (completion.choices[0] as Choice & { token_ids: number[] }).token_ids;
                  return { reward: tokens.filter((token) => token % 2 === 0).length / Math.max(1, tokens.length) };
                },
                { groupSize: 4 },
              );
              const { metrics } = await model.train(groups, {
                learningRate: 1e-2,
                ...(klPenaltyCoef === undefined ? {} : { klPenaltyCoef }),
              });
              if (metrics['train/kl_ref'] !== undefined) klRef.push(metrics['train/kl_ref']);
            }
            // KL(policy ‖ base), estimated on the policy's own samples: mean of log π − log π_base.
            const choices: (Choice & { prompt_token_ids: number[]; token_ids: number[] })[] = [];
            for (const word of ['cat', 'dog']) {
              const completion = await model.openai().chat.completions.create({
                model: model.inferenceName(),
                messages: [{ role: 'user', content: word }],
                max_tokens: 8,
                n: 8,
              });
              choices.push(...(completion.choices as typeof choices));
            }
            const items = choices.map((choice) => ({
              promptTokens: choice.prompt_token_ids,
              completionTokens: choice.token_ids,
            }));
            const base = await runSdkReference(server, { mode: 'logprobs', items });
            let sum = 0;
            let count = 0;
            choices.forEach((choice, index) => {
              const policy = choice.logprobs?.content?.map((entry) => entry.logprob) ?? [];
              const reference = base.results[index]?.completion_logprobs ?? [];
              policy.forEach((logprob, position) => {
                sum += logprob - (reference[position] as number);
                count += 1;
              });
            });
            await model.close();
            return { kl: sum / count, klRef };
          };
          const coef = 20;
          const penalised = await run('kl-on', coef);
          const free = await run('kl-off', undefined);
          console.log(
            `KL(policy ‖ base) after ${steps} steps: ${penalised.kl.toFixed(4)} with klPenaltyCoef ${coef} (kl_ref per step ${penalised.klRef.map((value) => value.toFixed(4)).join(', ')}), ${free.kl.toFixed(4)} without`,
          );
          expect(penalised.klRef).toHaveLength(steps);
          expect(free.klRef).toHaveLength(0);
          expect(penalised.kl).toBeLessThan(free.kl / 2);
        },
        15 * MINUTE,
      );
    });

    describe('faults', () => {
      it('a wrong URL fails connect with a connection error naming the address, within its timeout', async () => {
        const backend = backendFor({ baseURL: 'http://127.0.0.1:9', maxRetries: 1, timeout: 5_000 });
        const started = Date.now();
        const error = await backend.connect().then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(error).toBeInstanceOf(APIConnectionError);
        expect((error as Error).message).toContain('http://127.0.0.1:9');
        expect(Date.now() - started).toBeLessThan(15_000);
      });

      it(
        'a future that stalls fails the job with TinkerFutureTimeoutError text within futureTimeout',
        async () => {
          let stall = false;
          const { fetch } = recordingFetch((route) => stall && route === 'retrieve_future');
          const backend = backendFor({ fetch, futureTimeout: 20_000 });
          const model = new TrainableModel({ project: 'tinker', name: 'stall', baseModel: modelDir });
          await model.register(backend);
          const groups = await gatherTrajectoryGroups(
            [0],
            async () => {
              await model.openai().chat.completions.create({
                model: model.inferenceName(),
                messages: [{ role: 'user', content: 'hi' }],
                max_tokens: 4,
              });
              return { reward: Math.random() };
            },
            { groupSize: 3 },
          );
          stall = true;
          const error = await model.train(groups, { learningRate: 1e-3 }, { timeout: 60_000 }).then(
            () => undefined,
            (caught: unknown) => caught,
          );
          expect(error).toBeInstanceOf(TrainingJobFailedError);
          expect((error as Error).message).toContain('gave no result within 20000 ms');
          expect(new TinkerFutureTimeoutError('x', '1', 1).retryable).toBe(true);
          stall = false;
          await model.close();
        },
        5 * MINUTE,
      );

      it(
        'a server killed mid-step fails the step with its cause; once it is back the trainer resumes from the saved state',
        async () => {
          const backend = backendFor({ futureTimeout: 20_000, maxRetries: 1 });
          const model = new TrainableModel({ project: 'tinker', name: 'crash', baseModel: modelDir });
          await model.register(backend);
          const options = {
            model,
            scenarios: ['cat', 'dog'],
            rollout: async (word: string) => {
              await model.openai().chat.completions.create({
                model: model.inferenceName(),
                messages: [{ role: 'user', content: word }],
                max_tokens: 4,
              });
            },
            reward: () => Math.random(),
            groupSize: 3,
            groupsPerStep: 2,
            train: { learningRate: 1e-3 },
            progress: false as const,
          };
          expect((await new RLTrainer({ ...options, maxSteps: 1 }).run()).step).toBe(1);
          const second = new RLTrainer({ ...options, maxSteps: 2 });
          const killed = server.kill.bind(server);
          let killing: Promise<void> | undefined;
          model.on('job:submitted', () => {
            killing ??= killed();
          });
          const failure = await second.run().then(
            () => undefined,
            (caught: unknown) => caught as Error,
          );
          expect(failure).toBeDefined();
          expect(failure?.message).toMatch(/Tinker|no response|ECONNREFUSED/);
          await killing;
          await server.restart();
          const resumed = await new RLTrainer({ ...options, maxSteps: 2 }).run();
          expect(resumed.step).toBe(2);
          // Step 1's sampler weights belonged to a model the restart unloaded: saved again from its state.
          const old = await model.openai().chat.completions.create({
            model: model.inferenceName(1),
            messages: [{ role: 'user', content: 'cat' }],
            max_tokens: 4,
          });
          expect(old.choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
          await model.close();
        },
        15 * MINUTE,
      );
    });
  },
);

/** The checkpoint directory of a model's step in a backend's data directory. */
function stepDirectory(backend: TinkerBackend, modelId: string, step: number): string {
  return path.join(backend.dataDir, 'weights', modelId, `step-${step}`);
}
