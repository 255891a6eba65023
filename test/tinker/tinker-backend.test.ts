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
import { ForwardBackwardRequestSchema } from '../../src/backends/tinker/proto/tinker_public_pb.js';
import { TinkerClient } from '../../src/backends/tinker/tinker-client.js';
import { readInt32, readInt64 } from '../../src/backends/tinker/tensors.js';
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
