/**
 * A Hugging Face model through the local service: found in a Hugging Face cache layout, listed by
 * `GET /v1/preview/base-models`, registered, sampled with the real Qwen3 tokenizer and chat
 * template, trained by an RL and an SFT job (on the training worker thread), its checkpoints PEFT
 * adapters; a model that is not there answers 422 with where the engine looked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { main } from '../../src/cli/main.js';
import { loadTensorFlow } from '../../src/engine/backend.js';
import { disposeBase, loadBaseTensors, readHfConfig } from '../../src/engine/hf/files.js';
import { disposeLora, readAdapter, uploadLora } from '../../src/engine/hf/lora.js';
import { forwardLogits, runnable } from '../../src/engine/hf/model.js';
import { writeTinyQwen3 } from 'policyloop/testing';
import { readSafetensors } from '../../src/engine/safetensors.js';
import { DEV_API_KEY, createApp } from 'policyloop/server';
import type { App } from 'policyloop/server';
import type { Choice } from 'policyloop/schema';

const MODEL_ID = 'policyloop-test/tiny-qwen3';
let app: App;
let directory: string;
let savedCache: string | undefined;

beforeAll(async () => {
  directory = await mkdtemp(path.join(os.tmpdir(), 'hf-service-'));
  const hub = path.join(directory, 'hub');
  const repository = path.join(hub, 'models--policyloop-test--tiny-qwen3');
  await writeTinyQwen3(path.join(repository, 'snapshots', 'abc123'), { hiddenSize: 32, intermediateSize: 64 });
  await mkdir(path.join(repository, 'refs'), { recursive: true });
  await writeFile(path.join(repository, 'refs', 'main'), 'abc123');
  savedCache = process.env['HF_HUB_CACHE'];
  process.env['HF_HUB_CACHE'] = hub;
  app = await createApp({ dataDir: path.join(directory, 'data') });
});
afterAll(async () => {
  await app?.close();
  if (savedCache === undefined) delete process.env['HF_HUB_CACHE'];
  else process.env['HF_HUB_CACHE'] = savedCache;
  await rm(directory, { recursive: true, force: true });
});

async function send(method: string, route: string, body?: unknown): Promise<Response> {
  return app.fetch(
    new Request(`http://local${route}`, {
      method,
      headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }),
  );
}

async function call<T>(method: string, route: string, body?: unknown): Promise<T> {
  const response = await send(method, route, body);
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

async function events(jobId: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  for (let attempt = 0; attempt < 1500; attempt += 1) {
    const page = await call<{ data: { type: string; data: Record<string, unknown> }[] }>(
      'GET',
      `/v1/preview/training-jobs/${jobId}/events?limit=100`,
    );
    if (page.data.some((event) => event.type === 'training_ended' || event.type === 'training_failed'))
      return page.data;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`job ${jobId} did not end`);
}

describe('a Hugging Face model through the local service', () => {
  it('lists the cached model among the base models', async () => {
    const models = await call<string[]>('GET', '/v1/preview/base-models');
    expect(models).toContain(MODEL_ID);
    expect(models).toContain('policyloop/tiny-chat');
  });

  it('answers 422 for a model that is not there, saying where it looked and how to download it', async () => {
    const response = await send('POST', '/v1/preview/models', {
      project: 'hf',
      name: 'missing',
      base_model: 'Qwen/Qwen3-0.6B',
    });
    expect(response.status).toBe(422);
    const text = await response.text();
    expect(text).toContain('models--Qwen--Qwen3-0.6B');
    expect(text).toContain('huggingface-cli download Qwen/Qwen3-0.6B');
  });

  it('samples with the Qwen3 template and trains an RL job, then an SFT job, into PEFT adapters', async () => {
    const model = await call<{ id: string; entity: string; project: string; name: string }>(
      'POST',
      '/v1/preview/models',
      { project: 'hf', name: 'tiny', base_model: MODEL_ID },
    );
    const inferenceName = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;
    const messages = [{ role: 'user', content: 'Say hi' }];
    const result = await call<{ choices: Choice[]; usage: { prompt_tokens: number } }>('POST', '/v1/chat/completions', {
      model: inferenceName,
      messages,
      n: 4,
      max_tokens: 4,
      temperature: 1,
      logprobs: true,
      seed: 5,
    });
    // "<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n" in Qwen3's own tokens.
    expect(result.usage.prompt_tokens).toBe(10);
    expect(result.choices).toHaveLength(4);
    const trajectoryGroups = [
      {
        trajectories: result.choices.map((choice, index) => ({
          messages_and_choices: [...messages, choice],
          reward: index % 2,
        })),
      },
    ];
    const rl = await call<{ id: string }>('POST', '/v1/preview/training-jobs', {
      model_id: model.id,
      trajectory_groups: trajectoryGroups,
      experimental_config: { learning_rate: 1e-3, lora_rank: 2 },
    });
    const rlEvents = await events(rl.id);
    const step = rlEvents.find((event) => event.type === 'gradient_step');
    expect(rlEvents.map((event) => event.type)).toContain('training_ended');
    expect(Math.abs(step?.data['kl_div'] as number)).toBeLessThan(1e-4);
    expect(step?.data['num_trainable_tokens']).toBe(
      result.choices.reduce((sum, choice) => sum + (choice.logprobs?.content?.length ?? 0), 0),
    );

    const rows = [
      { messages: [...messages, { role: 'assistant', content: 'hi' }] },
      {
        messages: [
          { role: 'user', content: 'Say bye' },
          { role: 'assistant', content: 'bye' },
        ],
      },
    ];
    const training = rows.map((row) => JSON.stringify(row)).join('\n');
    const sft = await call<{ id: string }>('POST', '/v1/preview/sft-training-jobs', {
      model_id: model.id,
      training_data_url: `data:application/jsonl;base64,${Buffer.from(training).toString('base64')}`,
      config: { batch_size: 2, learning_rate: 1e-3 },
    });
    const sftEvents = await events(sft.id);
    expect(sftEvents.map((event) => event.type)).toContain('training_ended');

    const checkpoints = await call<{ data: { step: number }[] }>('GET', `/v1/preview/models/${model.id}/checkpoints`);
    expect(checkpoints.data.map((checkpoint) => checkpoint.step).sort()).toEqual([1, 2]);
    const files = path.join(directory, 'data');
    const adapterConfigs: string[] = [];
    const walk = async (folder: string): Promise<void> => {
      for (const entry of await readdir(folder, { withFileTypes: true })) {
        const full = path.join(folder, entry.name);
        if (entry.isDirectory()) await walk(full);
        else if (entry.name === 'adapter_config.json') adapterConfigs.push(full);
      }
    };
    await walk(files);
    expect(adapterConfigs).toHaveLength(2);
    for (const file of adapterConfigs) {
      expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
        peft_type: 'LORA',
        r: 2,
        base_model_name_or_path: MODEL_ID,
      });
      expect(existsSync(path.join(path.dirname(file), 'adapter_model.safetensors'))).toBe(true);
    }
    // The trained checkpoint serves completions.
    const after = await call<{ choices: Choice[] }>('POST', '/v1/chat/completions', {
      model: inferenceName,
      messages,
      max_tokens: 3,
    });
    expect(after.choices).toHaveLength(1);
    // Streaming: the chunks' deltas add up to the completion.
    const streamed = await send('POST', '/v1/chat/completions', {
      model: inferenceName,
      messages,
      max_tokens: 3,
      temperature: 0,
      stream: true,
    });
    expect(streamed.status).toBe(200);
    const body = await streamed.text();
    const chunks = body
      .split('\n')
      .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
      .map((line) => JSON.parse(line.slice(6)) as { choices: { delta: { content?: string | null } }[] });
    const greedy = await call<{ choices: Choice[] }>('POST', '/v1/chat/completions', {
      model: inferenceName,
      messages,
      max_tokens: 3,
      temperature: 0,
    });
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toBe(
      greedy.choices[0]?.message.content,
    );
    expect(body.trim().endsWith('data: [DONE]')).toBe(true);

    // `policyloop export`: the adapter of step 1, and the merged model of step 2.
    const dataDir = path.join(directory, 'data');
    const adapterOut = path.join(directory, 'export-adapter');
    expect(await main(['export', `hf/tiny:1`, '--out', adapterOut, '--data-dir', dataDir])).toBe(0);
    expect((await readdir(adapterOut)).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    const exported = await readSafetensors(path.join(adapterOut, 'adapter_model.safetensors'));
    expect(exported.tensors.get('base_model.model.model.layers.1.mlp.up_proj.lora_A.weight')?.shape).toEqual([2, 32]);
    const mergedOut = path.join(directory, 'export-merged');
    expect(await main(['export', `${model.id}`, '--out', mergedOut, '--merged', '--data-dir', dataDir])).toBe(0);
    expect((await readdir(mergedOut)).sort()).toEqual([
      'config.json',
      'generation_config.json',
      'model.safetensors',
      'tokenizer.json',
      'tokenizer_config.json',
    ]);
    // The merged model computes what base + adapter computes.
    const tf = await loadTensorFlow();
    const snapshot = path.join(directory, 'hub', 'models--policyloop-test--tiny-qwen3', 'snapshots', 'abc123');
    const config = await readHfConfig(snapshot);
    const latest = path.join(dataDir, checkpointPathOf(adapterConfigs, 2));
    const adapter = await readAdapter(latest, config);
    const base = await loadBaseTensors(tf, snapshot, config);
    const merged = await loadBaseTensors(tf, mergedOut, await readHfConfig(mergedOut));
    const lora = uploadLora(tf, config, adapter.settings, adapter.weights);
    const ids = Int32Array.from([151644, 872, 198, 25, 151645, 198]);
    const withAdapter = forwardLogits(tf, runnable(config, base, lora), ids, 1, ids.length).dataSync();
    const fromMerged = forwardLogits(tf, runnable(config, merged, null), ids, 1, ids.length).dataSync();
    const withoutAdapter = forwardLogits(tf, runnable(config, base, null), ids, 1, ids.length).dataSync();
    let difference = 0;
    let adapterEffect = 0;
    for (let index = 0; index < withAdapter.length; index += 1) {
      difference = Math.max(difference, Math.abs((withAdapter[index] as number) - (fromMerged[index] as number)));
      adapterEffect = Math.max(
        adapterEffect,
        Math.abs((withAdapter[index] as number) - (withoutAdapter[index] as number)),
      );
    }
    expect(adapterEffect).toBeGreaterThan(1e-4);
    expect(difference).toBeLessThan(1e-5);
    disposeLora(lora);
    disposeBase(base);
    disposeBase(merged);
  });
});

/** The checkpoint folder (relative to the data dir) of the adapter written at `step`. */
function checkpointPathOf(adapterConfigs: readonly string[], step: number): string {
  const found = adapterConfigs
    .map((file) => path.dirname(file))
    .find(
      (folder) =>
        folder.endsWith(`${path.sep}${step}`) || folder.includes(`step-${step}`) || folder.endsWith(`-${step}`),
    );
  if (!found) throw new Error(`no checkpoint folder for step ${step} among ${adapterConfigs.join(', ')}`);
  return path.relative(path.join(directory, 'data'), found);
}
