/**
 * `context.endpoint`, the per-rollout endpoint for agents in other processes, against the real
 * local service: Node child processes on the `openai` and `@anthropic-ai/sdk` packages, configured
 * only by `context.endpoint.env`, make chat-completions, Responses and Messages calls (streamed
 * too); each call lands in its own rollout's trajectory (16 children at once, not mixed) and the
 * groups train. A wrong key gets 401, an unknown rollout 404, an ended one 410 naming it, a bad
 * body 400, and the endpoint goes on serving.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  gatherTrajectoryGroups,
  isChoice,
  LocalBackend,
  PolicyloopError,
  RLTrainer,
  TrainableModel,
  type Trajectory,
} from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { runChild } from '../support/run-child.js';

const CHILD = path.join(import.meta.dirname, 'support', 'endpoint-child.mjs');
const WORDS = ['apple', 'brick', 'cloud', 'delta', 'ember', 'flint', 'grove', 'harbor'];

let dataDir: string;
let backend: LocalBackend;
let model: TrainableModel;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-endpoint-'));
  backend = await LocalBackend.start({ dataDir });
  model = new TrainableModel({ project: 'endpoint', name: 'child', baseModel: 'policyloop/tiny-chat' });
  await model.register(backend);
});
afterAll(async () => {
  await model?.close();
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** Every conversation of a trajectory (main first), as items. */
function conversations(trajectory: Trajectory) {
  return [
    trajectory.messages_and_choices,
    ...trajectory.additional_histories.map((history) => history.messages_and_choices),
  ];
}

/** The text of every user message of a trajectory. */
function userTexts(trajectory: Trajectory): string[] {
  return conversations(trajectory)
    .flat()
    .flatMap((item) => (!isChoice(item) && item.role === 'user' ? [String(item.content)] : []));
}

describe('context.endpoint', () => {
  it('records the calls of 16 child processes at once, each in its own rollout, and the groups train', async () => {
    const trainingKey = model.inferenceApiKey;
    const groups = await gatherTrajectoryGroups(
      WORDS,
      async (word, context) => {
        const { env, apiKey, openaiBaseURL, anthropicBaseURL } = context.endpoint;
        expect(apiKey).not.toBe(trainingKey);
        expect(Object.values(env)).not.toContain(trainingKey);
        expect(env).toEqual({
          OPENAI_BASE_URL: openaiBaseURL,
          OPENAI_API_KEY: apiKey,
          ANTHROPIC_BASE_URL: anthropicBaseURL,
          ANTHROPIC_API_KEY: apiKey,
        });
        expect(new URL(openaiBaseURL).hostname).toBe('127.0.0.1');
        const { WANDB_API_KEY: _omitted, ...inherited } = process.env;
        const output = await runChild(
          process.execPath,
          [CHILD, word],
          { ...inherited, ...env },
          { signal: context.signal },
        );
        const result = JSON.parse(output) as Record<string, unknown>;
        expect(result).toMatchObject({ word, models: [model.inferenceName()], wandbKey: null });
        context.trajectory.log(output.trim());
        return { reward: context.index };
      },
      { groupSize: 2, concurrency: 16, model },
    );
    expect(groups).toHaveLength(WORDS.length);
    for (const [groupIndex, group] of groups.entries()) {
      expect(group.exceptions ?? []).toEqual([]);
      expect(group.trajectories).toHaveLength(2);
      const word = WORDS[groupIndex] as string;
      for (const trajectory of group.trajectories) {
        // Three calls, three conversations (none continues another), each with its Choice.
        const texts = userTexts(trajectory);
        expect(texts.sort()).toEqual([`Again ${word}.`, `Once more ${word}.`, `Say ${word}.`]);
        const choices = conversations(trajectory).flat().filter(isChoice) as Choice[];
        expect(choices).toHaveLength(3);
        for (const choice of choices) expect(choice.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
      }
    }
    const { step } = await model.train(groups);
    expect(step).toBe(1);
  });

  it('answers a wrong key 401, an unknown rollout 404, an ended rollout 410 and a bad body 400, and goes on', async () => {
    let ended: string | undefined;
    const statuses: Array<[string, number, string]> = [];
    const groups = await gatherTrajectoryGroups(
      ['first', 'second'],
      async (word, context) => {
        const { openaiBaseURL, anthropicBaseURL, apiKey } = context.endpoint;
        if (ended === undefined) {
          ended = openaiBaseURL;
          return;
        }
        const post = async (what: string, url: string, body: string, key = apiKey) => {
          const response = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
            body,
          });
          statuses.push([what, response.status, await response.text()]);
        };
        const chat = JSON.stringify({ model: 'any', messages: [{ role: 'user', content: word }], max_tokens: 2 });
        await post('wrong key', `${openaiBaseURL}/chat/completions`, chat, 'sk-wrong');
        await post('unknown rollout', `${new URL(openaiBaseURL).origin}/rollouts/999999/v1/chat/completions`, chat);
        await post('ended rollout', `${ended}/chat/completions`, chat);
        await post('not JSON', `${openaiBaseURL}/chat/completions`, '{"model":');
        await post(
          'a built-in tool',
          `${openaiBaseURL}/responses`,
          JSON.stringify({ input: 'x', tools: [{ type: 'web_search' }] }),
        );
        await post(
          'an image',
          `${anthropicBaseURL}/v1/messages`,
          JSON.stringify({
            max_tokens: 2,
            messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/y.png' } }] }],
          }),
        );
        await post('unknown path', `${openaiBaseURL}/embeddings`, '{}');
        await post('still serving', `${openaiBaseURL}/chat/completions`, chat);
      },
      { concurrency: 1, model },
    );
    const byWhat = Object.fromEntries(statuses.map(([what, status, text]) => [what, { status, text }]));
    expect(byWhat['wrong key']?.status).toBe(401);
    expect(byWhat['unknown rollout']?.status).toBe(404);
    expect(byWhat['ended rollout']).toMatchObject({ status: 410 });
    expect(byWhat['ended rollout']?.text).toContain('rollout 0 of group 0 (attempt 0) has ended');
    expect(byWhat['not JSON']?.status).toBe(400);
    expect(byWhat['a built-in tool']?.status).toBe(400);
    expect(byWhat['a built-in tool']?.text).toContain('web search tool');
    expect(byWhat['an image']).toMatchObject({ status: 400 });
    expect(JSON.parse(byWhat['an image']?.text ?? '{}')).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error' },
    });
    expect(byWhat['unknown path']?.status).toBe(404);
    expect(byWhat['still serving']?.status).toBe(200);
    // Only the one good call was recorded.
    const second = groups[1]?.trajectories[0] as Trajectory;
    expect(conversations(second).flat().filter(isChoice)).toHaveLength(1);
  });

  it('tells a rollout of a gather without a model what to pass', async () => {
    const groups = await gatherTrajectoryGroups(['x'], async (_scenario, context) => {
      try {
        void context.endpoint;
      } catch (error) {
        return { metadata: { error: error instanceof PolicyloopError ? error.message : 'other' } };
      }
      return undefined;
    });
    expect(groups[0]?.trajectories[0]?.metadata['error']).toMatch(/pass `model` to gatherTrajectoryGroups/);
  });

  it("makes an RLTrainer's rollouts sample the step they are stamped with, whatever model they name", async () => {
    const pinned = new TrainableModel({ project: 'endpoint', name: 'pinned', baseModel: 'policyloop/tiny-chat' });
    await pinned.register(backend);
    // What reaches the service: the forwarded (translated) chat completions, seen under the model's fetch.
    const sent: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = async (input, init) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (url === `${pinned.inferenceBaseURL}/chat/completions` && typeof init?.body === 'string')
        sent.push(String((JSON.parse(init.body) as { model?: unknown }).model));
      return realFetch(input, init);
    };
    try {
      const stamped: number[] = [];
      const trainer = new RLTrainer({
        model: pinned,
        scenarios: ['one', 'two'],
        groupSize: 4,
        groupsPerStep: 2,
        maxSteps: 3,
        maxStepsOffPolicy: 0,
        progress: false,
        rollout: async (word, context) => {
          const { openaiBaseURL, apiKey } = context.endpoint;
          const response = await fetch(`${openaiBaseURL}/responses`, {
            method: 'POST',
            headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'gpt-4o', input: word, max_output_tokens: 4 }),
          });
          expect(response.status).toBe(200);
          return { reward: context.index };
        },
      });
      trainer.on('step:end', ({ step }) => {
        stamped.push(step);
      });
      const summary = await trainer.run();
      expect(summary.step).toBe(3);
      const name = pinned.inferenceName();
      expect(new Set(sent)).toEqual(new Set([`${name}:step0`, `${name}:step1`, `${name}:step2`]));
      expect(stamped).toEqual([0, 1, 2]);
    } finally {
      globalThis.fetch = realFetch;
      await pinned.close();
    }
  });
});
