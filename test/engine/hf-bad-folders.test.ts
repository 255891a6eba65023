/**
 * Model folders a user can get wrong, refused by name and never answered with a 500: an
 * unsupported architecture, a folder without config.json, tokenizer.json, a chat template, its
 * weights or a shard, an empty tokenizer.json, a cut-short model.safetensors, and weights whose
 * shapes contradict config.json. `serve --model DIR` exits 2 before listening; in the Hugging Face
 * cache such a folder is not listed and registering on it is a 422 naming the folder and why; a
 * chat completion on a folder that broke after registration is a 422, not a 500. And
 * `policyloop export` on a model trained on a `--model` folder, with the service stopped, also
 * after the folder moved.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { writeTinyQwen3 } from 'policyloop/testing';
import { createApp, DEV_API_KEY, type App } from 'policyloop/server';
import { killChildren, startCli } from '../cli/support/run-cli.js';

const FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'];
const SUPPORTED =
  /Supported: .*LlamaForCausalLM or Qwen3ForCausalLM.*tokenizer\.json.*chat template.*model\.safetensors/s;

let root: string;
let good: string;

/** A copy of the good folder (its files linked, as the Hugging Face cache links its blobs) changed by `change`. */
async function variant(folder: string, change: (folder: string) => Promise<void>): Promise<string> {
  await mkdir(folder, { recursive: true });
  for (const file of FILES) await symlink(path.join(good, file), path.join(folder, file));
  await change(folder);
  return folder;
}

/** Replaces a linked file by a written one. */
async function rewrite(folder: string, file: string, text: string): Promise<void> {
  await rm(path.join(folder, file));
  await writeFile(path.join(folder, file), text);
}

async function json(folder: string, file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(path.join(folder, file), 'utf8')) as Record<string, unknown>;
}

/** The bad folders, each with what its refusal must name. */
const BAD: Record<string, { change: (folder: string) => Promise<void>; names: RegExp }> = {
  gpt2: {
    change: async (folder) =>
      rewrite(
        folder,
        'config.json',
        JSON.stringify({ ...(await json(good, 'config.json')), architectures: ['GPT2LMHeadModel'] }),
      ),
    names: /architecture GPT2LMHeadModel is not supported/,
  },
  'no-config': { change: (folder) => rm(path.join(folder, 'config.json')), names: /has no config\.json/ },
  'no-tokenizer': { change: (folder) => rm(path.join(folder, 'tokenizer.json')), names: /has no tokenizer\.json/ },
  'empty-tokenizer': {
    change: (folder) => rewrite(folder, 'tokenizer.json', ''),
    names: /tokenizer\.json is empty/,
  },
  'no-template': {
    change: async (folder) => {
      const { chat_template: _template, ...config } = await json(good, 'tokenizer_config.json');
      await rewrite(folder, 'tokenizer_config.json', JSON.stringify(config));
    },
    names: /has no chat template/,
  },
  'no-weights': { change: (folder) => rm(path.join(folder, 'model.safetensors')), names: /has no model\.safetensors/ },
  'missing-shard': {
    change: async (folder) => {
      await rm(path.join(folder, 'model.safetensors'));
      await writeFile(
        path.join(folder, 'model.safetensors.index.json'),
        JSON.stringify({ weight_map: { 'model.embed_tokens.weight': 'model-00001-of-00002.safetensors' } }),
      );
    },
    names: /lacks the weight shard model-00001-of-00002\.safetensors/,
  },
  truncated: {
    change: async (folder) => {
      const bytes = await readFile(path.join(good, 'model.safetensors'));
      await rm(path.join(folder, 'model.safetensors'));
      await writeFile(path.join(folder, 'model.safetensors'), bytes.subarray(0, Math.floor(bytes.length / 2)));
    },
    names: /model\.safetensors is cut short/,
  },
};

beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'hf-bad-folders-'));
  good = await writeTinyQwen3(path.join(root, 'good'), { hiddenSize: 32, intermediateSize: 64 });
}, 120_000);
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});
afterEach(() => {
  killChildren();
});

describe('serve --model DIR on a folder the engine cannot serve', () => {
  it('exits 2 before listening, naming the folder, the missing or broken file or the architecture, and what is supported', async () => {
    const runs = await Promise.all(
      Object.entries(BAD).map(async ([name, { change, names }]) => {
        const folder = await variant(path.join(root, 'serve', name), change);
        const dataDir = path.join(root, 'serve-data', name);
        const run = startCli(['serve', '--port', '0', '--data-dir', dataDir, '--model', folder]);
        return { name, folder, dataDir, names, result: await run.done };
      }),
    );
    for (const { name, folder, dataDir, names, result } of runs) {
      expect(result.code, `${name}: ${result.stderr}`).toBe(2);
      expect(result.stdout, name).not.toContain('listening');
      expect(result.stderr, name).toContain(folder);
      expect(result.stderr, name).toMatch(names);
      expect(result.stderr, name).toMatch(SUPPORTED);
      // Nothing was opened: the data directory was not even created.
      expect(existsSync(dataDir), name).toBe(false);
    }
  }, 180_000);

  it('writes the OpenAPI document of a good folder without listening, and refuses a bad one the same way', async () => {
    const printed = await startCli(['serve', '--print-openapi', '--model', good, '--port', '8123']).done;
    expect(printed.code, printed.stderr).toBe(0);
    const document = JSON.parse(printed.stdout) as {
      servers: { url: string }[];
      components: { schemas: { ModelCreate: { properties: { base_model: { enum: string[] } } } } };
    };
    expect(document.servers).toEqual([{ url: 'http://127.0.0.1:8123' }]);
    expect(document.components.schemas.ModelCreate.properties.base_model.enum).toContain(good);
    const refused = await startCli(['serve', '--print-openapi', '--model', path.join(root, 'serve', 'gpt2')]).done;
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(BAD['gpt2']?.names as RegExp);
  }, 60_000);
});

describe('bad folders in the Hugging Face cache', () => {
  let app: App;
  let hub: string;
  let savedCache: string | undefined;

  /** Puts `folder` into the cache as `policyloop-bad/<name>`. */
  async function cache(name: string, build: (snapshot: string) => Promise<unknown>): Promise<string> {
    const repository = path.join(hub, `models--policyloop-bad--${name}`);
    const snapshot = path.join(repository, 'snapshots', 'rev1');
    await build(snapshot);
    await mkdir(path.join(repository, 'refs'), { recursive: true });
    await writeFile(path.join(repository, 'refs', 'main'), 'rev1');
    return snapshot;
  }

  async function send(method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await app.fetch(
      new Request(`http://local${route}`, {
        method,
        headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
  }

  const register = (name: string, baseModel: string) =>
    send('POST', '/v1/preview/models', { project: 'bad', name, base_model: baseModel });
  /** Waits until the base-model list (read again at most every second) holds `id`. */
  async function listed(id: string): Promise<void> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      if ((await send('GET', '/v1/preview/base-models')).body.includes(id)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`${id} was never listed`);
  }
  const complete = (model: string) =>
    send('POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });

  beforeAll(async () => {
    hub = path.join(root, 'hub');
    for (const [name, { change }] of Object.entries(BAD)) await cache(name, (snapshot) => variant(snapshot, change));
    await cache('good', (snapshot) => variant(snapshot, async () => undefined));
    savedCache = process.env['HF_HUB_CACHE'];
    process.env['HF_HUB_CACHE'] = hub;
    app = await createApp({ dataDir: path.join(root, 'cache-data') });
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    if (savedCache === undefined) delete process.env['HF_HUB_CACHE'];
    else process.env['HF_HUB_CACHE'] = savedCache;
  });

  it('does not list them, and a registration on one is a 422 naming the folder and why', async () => {
    const listed = await send('GET', '/v1/preview/base-models');
    expect(listed.body).toContain('policyloop-bad/good');
    for (const name of Object.keys(BAD)) expect(listed.body, name).not.toContain(`policyloop-bad/${name}`);
    for (const [name, { names }] of Object.entries(BAD)) {
      const answer = await register(name, `policyloop-bad/${name}`);
      expect(answer.status, name).toBe(422);
      expect(answer.body.detail[0].loc, name).toEqual(['body', 'base_model']);
      const message = answer.body.detail[0].msg as string;
      expect(message, name).toContain(path.join(hub, `models--policyloop-bad--${name}`, 'snapshots', 'rev1'));
      expect(message, name).toMatch(names);
      expect(message, name).toMatch(SUPPORTED);
    }
    expect((await register('fine', 'policyloop-bad/good')).status).toBe(200);
  }, 60_000);

  it('answers a completion on weights whose shapes contradict config.json with a 422 naming the tensor, not a 500', async () => {
    // The files are whole, so the folder is listed; what it holds shows when the weights load.
    await cache('wrong-shapes', (snapshot) =>
      variant(snapshot, async (folder) =>
        rewrite(folder, 'config.json', JSON.stringify({ ...(await json(good, 'config.json')), intermediate_size: 96 })),
      ),
    );
    await listed('policyloop-bad/wrong-shapes');
    expect((await register('shapes', 'policyloop-bad/wrong-shapes')).status).toBe(200);
    const answer = await complete('shapes');
    expect(answer.status).toBe(422);
    expect(answer.body.detail[0].loc).toEqual(['body', 'model']);
    expect(answer.body.detail[0].msg).toMatch(
      /tensor model\.layers\.0\.mlp\.\w+_proj\.weight has shape \[\d+, \d+\], expected/,
    );
    expect(answer.body.detail[0].msg).toContain('models--policyloop-bad--wrong-shapes');
  }, 60_000);

  it('answers a completion on a folder broken after registration with a 422 saying why, never a 500', async () => {
    const breakings: Record<string, (folder: string) => Promise<void>> = {
      'empty tokenizer.json': (folder) => rewrite(folder, 'tokenizer.json', ''),
      'no chat template': BAD['no-template']?.change as (folder: string) => Promise<void>,
      'cut-short model.safetensors': BAD['truncated']?.change as (folder: string) => Promise<void>,
    };
    for (const [what, breakIt] of Object.entries(breakings)) {
      const name = `later-${Object.keys(breakings).indexOf(what)}`;
      const snapshot = await cache(name, (folder) => variant(folder, async () => undefined));
      await listed(`policyloop-bad/${name}`);
      expect((await register(name, `policyloop-bad/${name}`)).status, what).toBe(200);
      await breakIt(snapshot);
      const answer = await complete(name);
      expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(422);
      expect(answer.body.detail[0].msg, what).toContain(snapshot);
    }
  }, 60_000);
});

describe('policyloop export on a model trained on a --model folder', () => {
  it('exports with the service stopped and no --model, and names the expected path once the folder moved', async () => {
    const folder = await variant(path.join(root, 'served'), async () => undefined);
    const dataDir = path.join(root, 'export-data');
    const app = await createApp({ dataDir, models: [folder] });
    let modelId = '';
    try {
      const call = async (method: string, route: string, body?: unknown): Promise<any> => {
        const response = await app.fetch(
          new Request(`http://local${route}`, {
            method,
            headers: { authorization: `Bearer ${DEV_API_KEY}`, 'content-type': 'application/json' },
            ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          }),
        );
        const text = await response.text();
        if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${text}`);
        return JSON.parse(text);
      };
      expect(await call('GET', '/v1/preview/base-models')).toContain(folder);
      const model = await call('POST', '/v1/preview/models', { project: 'exp', name: 'tiny', base_model: folder });
      modelId = model.id;
      const rows = [
        {
          messages: [
            { role: 'user', content: 'Say hi' },
            { role: 'assistant', content: 'hi' },
          ],
        },
      ];
      const job = await call('POST', '/v1/preview/sft-training-jobs', {
        model_id: model.id,
        training_data_url: `data:application/jsonl;base64,${Buffer.from(rows.map((row) => JSON.stringify(row)).join('\n')).toString('base64')}`,
        config: { batch_size: 1, learning_rate: 1e-3 },
      });
      for (let attempt = 0; ; attempt += 1) {
        const state = await call('GET', `/v1/preview/training-jobs/${job.id}`);
        if (state.status === 'COMPLETED') break;
        if (state.status === 'FAILED' || attempt > 600) throw new Error(`SFT job ended ${JSON.stringify(state)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await app.close();
    }

    // The service is stopped, and the folder is not passed again: its path is the base model's id.
    const out = path.join(root, 'export-out');
    const exported = await startCli(['export', 'exp/tiny', '--out', out, '--data-dir', dataDir]).done;
    expect(exported.code, exported.stderr).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    const adapterConfig = JSON.parse(await readFile(path.join(out, 'adapter_config.json'), 'utf8'));
    expect(adapterConfig.base_model_name_or_path).toBe(folder);

    // Moved: the message names the path expected and how to point at the new one.
    const moved = path.join(root, 'moved');
    await rename(folder, moved);
    const lost = await startCli(['export', modelId, '--out', path.join(root, 'export-lost'), '--data-dir', dataDir])
      .done;
    expect(lost.code).toBe(1);
    expect(lost.stderr).toContain(`trained on the base model folder ${folder}`);
    expect(lost.stderr).toContain('not there any more');
    expect(lost.stderr).toContain(`policyloop export ${modelId} --base NEW_DIR`);
    const found = await startCli([
      'export',
      'exp/tiny:1',
      '--out',
      path.join(root, 'export-moved'),
      '--merged',
      '--data-dir',
      dataDir,
      '--base',
      moved,
    ]).done;
    expect(found.code, found.stderr).toBe(0);
    expect(await readdir(path.join(root, 'export-moved'))).toContain('model.safetensors');
  }, 180_000);
});
