/**
 * `ScriptedBackend` with `listen: true`: the same service on a random loopback port, for clients
 * that reach `model.inferenceBaseURL` on their own (not through `model.fetch()`). Not in the fast
 * tier, which listens on no port.
 */
import { TrainableModel } from 'policyloop';
import { ScriptedBackend } from 'policyloop/testing';
import { describe, expect, it } from 'vitest';

describe('ScriptedBackend on loopback', () => {
  it('serves its API on 127.0.0.1 to any HTTP client, through `intercept` too, and stops listening on close', async () => {
    const seen: string[] = [];
    const backend = await ScriptedBackend.start({
      listen: true,
      sample: 'hello',
      intercept: (request, next) => {
        seen.push(new URL(request.url).pathname);
        return next(request);
      },
    });
    let baseURL = '';
    try {
      const model = await new TrainableModel({
        project: 'scripted',
        name: 'listen',
        baseModel: 'policyloop/tiny-chat',
      }).register(backend);
      baseURL = model.inferenceBaseURL;
      expect(baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
      // A plain fetch, as a client in another process would send it.
      const response = await fetch(`${baseURL}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${model.inferenceApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: model.inferenceName(), messages: [{ role: 'user', content: 'hi' }] }),
      });
      const completion = (await response.json()) as { choices: { message: { content: string } }[] };
      expect(completion.choices[0]?.message.content).toBe('hello');
      expect(backend.samples).toHaveLength(1);
      // The model's own requests went through `intercept`; the plain fetch did not.
      expect(seen).toContain('/v1/preview/models');
      expect(seen).not.toContain('/v1/chat/completions');
      await model.close();
    } finally {
      await backend.close();
    }
    await expect(fetch(`${baseURL}/health`)).rejects.toThrow();
  });
});
