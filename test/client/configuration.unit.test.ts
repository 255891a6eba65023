import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { InvalidArgumentError, MissingApiKeyError } from 'policyloop';
import { DEFAULT_BASE_URL, TrainingClient, VERSION } from 'policyloop/client';
import { fakeFetch, json } from './fake-fetch.js';

function clearEnv(): void {
  for (const name of ['POLICYLOOP_API_KEY', 'WANDB_API_KEY', 'POLICYLOOP_BASE_URL', 'POLICYLOOP_INFERENCE_BASE_URL']) {
    vi.stubEnv(name, '');
  }
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('API key', () => {
  it('without option or environment, construction fails naming both variables', () => {
    clearEnv();
    expect(() => new TrainingClient()).toThrow(MissingApiKeyError);
    expect(() => new TrainingClient()).toThrow(/POLICYLOOP_API_KEY.*WANDB_API_KEY/);
  });

  it('explicit option > POLICYLOOP_API_KEY > WANDB_API_KEY', async () => {
    clearEnv();
    vi.stubEnv('WANDB_API_KEY', 'from-wandb');
    expect(new TrainingClient().apiKey).toBe('from-wandb');
    vi.stubEnv('POLICYLOOP_API_KEY', 'from-policyloop');
    expect(new TrainingClient().apiKey).toBe('from-policyloop');
    const fake = fakeFetch(json({}));
    const client = new TrainingClient({ apiKey: 'explicit', fetch: fake.fetch });
    expect(client.apiKey).toBe('explicit');
    await client.health();
    expect(fake.requests[0]?.headers.get('authorization')).toBe('Bearer explicit');
  });

  it('a blank option or variable counts as unset', () => {
    clearEnv();
    vi.stubEnv('WANDB_API_KEY', 'from-wandb');
    vi.stubEnv('POLICYLOOP_API_KEY', '   ');
    expect(new TrainingClient({ apiKey: '' }).apiKey).toBe('from-wandb');
  });
});

describe('base URLs', () => {
  it('explicit option > POLICYLOOP_BASE_URL > the hosted default', () => {
    clearEnv();
    expect(new TrainingClient({ apiKey: 'k' }).baseURL).toBe(DEFAULT_BASE_URL);
    expect(DEFAULT_BASE_URL).toBe('https://api.training.wandb.ai/v1');
    vi.stubEnv('POLICYLOOP_BASE_URL', 'http://127.0.0.1:8000/v1');
    expect(new TrainingClient({ apiKey: 'k' }).baseURL).toBe('http://127.0.0.1:8000/v1');
    expect(new TrainingClient({ apiKey: 'k', baseURL: 'http://localhost:9/v1' }).baseURL).toBe('http://localhost:9/v1');
  });

  it('inference: explicit option > POLICYLOOP_INFERENCE_BASE_URL > the hosted default', () => {
    clearEnv();
    expect(new TrainingClient({ apiKey: 'k' }).inferenceBaseURL).toBe('https://api.inference.wandb.ai/v1');
    vi.stubEnv('POLICYLOOP_INFERENCE_BASE_URL', 'http://127.0.0.1:8001');
    expect(new TrainingClient({ apiKey: 'k' }).inferenceBaseURL).toBe('http://127.0.0.1:8001/v1');
    expect(new TrainingClient({ apiKey: 'k', inferenceBaseURL: 'http://x/v1/' }).inferenceBaseURL).toBe('http://x/v1');
  });

  it('with or without /v1 and trailing slashes, paths land under /v1', async () => {
    for (const base of ['http://svc', 'http://svc/', 'http://svc/v1', 'http://svc/v1/']) {
      const fake = fakeFetch(json([]));
      await new TrainingClient({ apiKey: 'k', baseURL: base, fetch: fake.fetch }).baseModels.list();
      expect(fake.requests[0]?.url.href).toBe('http://svc/v1/preview/base-models');
    }
    const fake = fakeFetch(json({}));
    await new TrainingClient({
      apiKey: 'k',
      baseURL: 'https://forge.coreweave.com/api/training/v1',
      fetch: fake.fetch,
    }).health();
    expect(fake.requests[0]?.url.href).toBe('https://forge.coreweave.com/api/training/v1/health');
  });

  it('a malformed base URL fails at construction', () => {
    expect(() => new TrainingClient({ apiKey: 'k', baseURL: 'localhost:8000' })).toThrow(InvalidArgumentError);
    expect(() => new TrainingClient({ apiKey: 'k', baseURL: 'not a url' })).toThrow(/baseURL/);
  });
});

describe('other options', () => {
  it('timeout and maxRetries default to 60 s and 2, and bad values fail at construction', () => {
    const client = new TrainingClient({ apiKey: 'k' });
    expect(client.timeout).toBe(60_000);
    expect(client.maxRetries).toBe(2);
    expect(() => new TrainingClient({ apiKey: 'k', timeout: 0 })).toThrow(/timeout/);
    expect(() => new TrainingClient({ apiKey: 'k', maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => new TrainingClient({ apiKey: 'k', maxRetries: 1.5 })).toThrow(/non-negative integer, got 1.5/);
  });

  it('a timeout longer than a timer can hold fails at construction instead of firing at once', () => {
    // setTimeout fires after 1 ms (with a console warning) for delays above 2^31 - 1 ms.
    expect(new TrainingClient({ apiKey: 'k', timeout: 2_147_483_647 }).timeout).toBe(2_147_483_647);
    expect(() => new TrainingClient({ apiKey: 'k', timeout: 2_147_483_648 })).toThrow(
      /at most 2147483647.*got 2147483648/,
    );
    expect(() => new TrainingClient({ apiKey: 'k', timeout: Number.POSITIVE_INFINITY })).toThrow(InvalidArgumentError);
  });

  it('a bad per-call timeout rejects before any request', async () => {
    const fake = fakeFetch(json({}));
    const client = new TrainingClient({ apiKey: 'k', fetch: fake.fetch });
    await expect(client.health({ timeout: Number.NaN })).rejects.toThrow(/options.timeout/);
    expect(fake.calls()).toBe(0);
  });

  it('a misspelt client option or per-call option is refused naming the nearest one, and nothing is sent', async () => {
    const fake = fakeFetch(json({}));
    expect(() => new TrainingClient({ apiKey: 'k', baseUrl: 'http://x.test' } as never)).toThrow(
      /^Unknown option `baseUrl`; did you mean `baseURL`\?$/,
    );
    const client = new TrainingClient({ apiKey: 'k', fetch: fake.fetch });
    const call = client.health({ timout: 1_000 } as never);
    await expect(call).rejects.toBeInstanceOf(InvalidArgumentError);
    await expect(call).rejects.toMatchObject({
      argument: 'options.timout',
      message: 'Unknown option `options.timout`; did you mean `options.timeout`?',
    });
    expect(fake.calls()).toBe(0);
  });

  it('the version header matches package.json', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    expect(VERSION).toBe(manifest.version);
  });

  it('uses the global fetch when none is injected', async () => {
    const fake = fakeFetch(json({ ok: 1 }));
    vi.stubGlobal('fetch', fake.fetch);
    try {
      await expect(new TrainingClient({ apiKey: 'k' }).health()).resolves.toEqual({ ok: 1 });
      expect(fake.requests[0]?.url.href).toBe('https://api.training.wandb.ai/v1/health');
    } finally {
      vi.unstubAllGlobals();
    }
  });
});
