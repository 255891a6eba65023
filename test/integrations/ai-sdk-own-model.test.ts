/**
 * The recipe of docs/integrations.md for an agent that names its own model (`openai('gpt-4.1')`):
 * alone, `model.fetch()` sends the name the agent asked for, which the training service does not
 * serve (404); wrapped so that the name is dropped from each request, the recording fetch fills in
 * the trained model's, and the agent's calls, on the AI SDK's default (the Responses API) and on
 * chat completions, are answered by the trained model and recorded with logprobs.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { choicesOf, gatherTrajectoryGroups, LocalBackend, TrainableModel } from 'policyloop';

let dataDir: string;
let backend: LocalBackend;
let model: TrainableModel;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-own-model-'));
  backend = await LocalBackend.start({ dataDir });
  model = new TrainableModel({ project: 'recipes', name: 'own-model', baseModel: 'policyloop/tiny-chat' });
  await model.register(backend);
});
afterAll(async () => {
  await model?.close();
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

// The recipe, as docs/integrations.md prints it.
/** `model.fetch()` for an agent that names a model of its own: the name is dropped, the trained model's filled in. */
function trainedModelFetch(trained: TrainableModel): typeof globalThis.fetch {
  const recording = trained.fetch(); // fills `model` into every request that names none
  return (input, init) => {
    if (typeof init?.body !== 'string') return recording(input, init);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(init.body) as Record<string, unknown>;
    } catch {
      return recording(input, init); // not JSON: not a model call
    }
    delete body['model'];
    return recording(input, { ...init, body: JSON.stringify(body) });
  };
}

describe('an AI SDK agent that names its own model', () => {
  it('gets a 404 through model.fetch() alone: the service does not serve gpt-4.1', async () => {
    const openai = createOpenAI({
      baseURL: model.inferenceBaseURL,
      apiKey: model.inferenceApiKey,
      fetch: model.fetch(),
    });
    const failure = await generateText({ model: openai('gpt-4.1'), prompt: 'Hi', maxRetries: 0 }).catch(
      (error: unknown) => error,
    );
    expect(failure).toMatchObject({ statusCode: 404 });
  });

  it('is answered by the trained model and recorded through the recipe, on Responses and chat completions', async () => {
    const openai = createOpenAI({
      baseURL: model.inferenceBaseURL,
      apiKey: model.inferenceApiKey,
      fetch: trainedModelFetch(model),
    });
    const served: string[] = [];
    const groups = await gatherTrajectoryGroups(
      ['responses', 'chat'],
      async (api) => {
        // The agent's own code, unchanged: it asks for gpt-4.1.
        const llm = api === 'responses' ? openai('gpt-4.1') : openai.chat('gpt-4.1');
        const result = await generateText({ model: llm, prompt: 'Say hi.', maxOutputTokens: 4, maxRetries: 0 });
        served.push(result.response.modelId);
      },
      { groupSize: 2 },
    );
    expect(served).toEqual(Array.from({ length: 4 }, () => model.inferenceName()));
    for (const group of groups) {
      expect(group.exceptions ?? []).toEqual([]);
      for (const trajectory of group.trajectories) {
        const choices = choicesOf(trajectory);
        expect(choices).toHaveLength(1);
        expect(choices[0]?.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
        expect(trajectory.messages_and_choices[0]).toMatchObject({ role: 'user', content: 'Say hi.' });
      }
    }
  });
});
