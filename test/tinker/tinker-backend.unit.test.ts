/**
 * `new TinkerBackend(...)` checks its arguments before any side effect: no request is sent, no
 * service starts, and each mistake is named with what to do about it.
 */
import { InvalidArgumentError, PolicyloopError, TinkerBackend } from 'policyloop';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { HOSTED_TINKER_URL } from '../../src/backends/tinker-backend.js';

const fetch = vi.fn(async () => new Response('{}')) as unknown as typeof globalThis.fetch;

beforeEach(() => {
  vi.stubEnv('TINKER_API_KEY', undefined);
  vi.stubEnv('TINKER_BASE_URL', undefined);
});

afterEach(() => {
  vi.unstubAllEnvs();
  vi.clearAllMocks();
});

describe('TinkerBackend construction', () => {
  it('hosted Tinker without a key names TINKER_API_KEY', () => {
    for (const options of [{}, { baseURL: HOSTED_TINKER_URL }, { baseURL: `${HOSTED_TINKER_URL}/` }]) {
      const attempt = () => new TinkerBackend({ ...options, fetch });
      expect(attempt).toThrow(PolicyloopError);
      expect(attempt).toThrow(/set the TINKER_API_KEY environment variable/);
    }
    expect(fetch).not.toHaveBeenCalled();
  });

  it('the key may come from TINKER_API_KEY, and a self-hosted server needs none', () => {
    vi.stubEnv('TINKER_API_KEY', 'tml-from-env');
    expect(new TinkerBackend({ fetch }).baseURL).toBe(HOSTED_TINKER_URL);
    vi.stubEnv('TINKER_API_KEY', undefined);
    vi.stubEnv('TINKER_BASE_URL', 'http://127.0.0.1:8000/');
    expect(new TinkerBackend({ fetch }).baseURL).toBe('http://127.0.0.1:8000');
    expect(new TinkerBackend({ baseURL: 'https://gpu-box.internal:8443', fetch }).baseURL).toBe(
      'https://gpu-box.internal:8443',
    );
    expect(fetch).not.toHaveBeenCalled();
  });

  it('a base URL that is not an http(s) URL is refused, quoting it', () => {
    for (const baseURL of ['not a url', '127.0.0.1:8000', 'localhost:8000', 'ftp://files.example/tinker']) {
      const attempt = () => new TinkerBackend({ baseURL, fetch });
      expect(attempt, baseURL).toThrow(InvalidArgumentError);
      expect(attempt, baseURL).toThrow(
        `Expected \`baseURL\` (or TINKER_BASE_URL) to be an http(s) URL, got "${baseURL}"`,
      );
    }
  });

  it('a bad TINKER_BASE_URL is refused the same way', () => {
    vi.stubEnv('TINKER_BASE_URL', 'localhost:8000');
    expect(() => new TinkerBackend({ fetch })).toThrow(
      /TINKER_BASE_URL\) to be an http\(s\) URL, got "localhost:8000"/,
    );
  });

  it('a LoRA rank that is not a positive integer is refused', () => {
    for (const rank of [0, -4, 1.5, Number.NaN]) {
      const attempt = () => new TinkerBackend({ baseURL: 'http://127.0.0.1:8000', lora: { rank }, fetch });
      expect(attempt, String(rank)).toThrow(InvalidArgumentError);
      expect(attempt, String(rank)).toThrow(/lora\.rank.*an integer >= 1/);
    }
    expect(new TinkerBackend({ baseURL: 'http://127.0.0.1:8000', lora: { rank: 8 }, fetch }).kind).toBe('tinker');
  });

  it('timeouts and retries are checked too', () => {
    const base = { baseURL: 'http://127.0.0.1:8000', fetch };
    expect(() => new TinkerBackend({ ...base, futureTimeout: -1 })).toThrow(/futureTimeout/);
    expect(() => new TinkerBackend({ ...base, timeout: 0 })).toThrow(/timeout/);
    expect(() => new TinkerBackend({ ...base, maxRetries: 1.5 })).toThrow(/maxRetries/);
    expect(() => new TinkerBackend({ ...base, port: 70_000 })).toThrow(/port/);
  });

  it('a misspelt option, or LoRA setting, is refused naming the nearest one', () => {
    const base = { baseURL: 'http://127.0.0.1:8000', fetch };
    expect(() => new TinkerBackend({ ...base, futureTimout: 1_000 } as never)).toThrow(
      'Unknown option `futureTimout`; did you mean `futureTimeout`?',
    );
    expect(() => new TinkerBackend({ ...base, lora: { rnak: 8 } } as never)).toThrow(
      'Unknown option `lora.rnak`; did you mean `lora.rank`?',
    );
    expect(fetch).not.toHaveBeenCalled();
  });
});
