/**
 * The translations on the hosted path: a model registered with `HostedBackend` over a stand-in of
 * the hosted service (an injected `fetch`, as the hosted-path tests drive it), called through the
 * Responses API (`model.openai()`, an `openai` client on `model.fetch()`), Anthropic's Messages
 * API (`model.anthropicBaseURL`) and a child process on `context.endpoint`. The hosted service
 * sees chat completions only, with the W&B key; the child never sees that key; the recorded
 * Choices go up in the training job with their logprobs.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gatherTrajectoryGroups, HostedBackend, isChoice, TrainableModel, type TrajectoryGroupInput } from 'policyloop';
import { runChild } from '../support/run-child.js';

const CHILD = path.join(import.meta.dirname, '..', 'rollout', 'support', 'endpoint-child.mjs');
const WANDB_KEY = 'wandb-key-never-shown';
const MODEL_ID = '00000000-0000-4000-8000-0000000000d1';
const JOB_ID = '00000000-0000-4000-8000-0000000000d2';
const EVENT_ID = '00000000-0000-4000-8000-0000000000d3';

interface SeenRequest {
  readonly method: string;
  readonly host: string;
  readonly path: string;
  readonly authorization: string | null;
  readonly body: Record<string, unknown> | undefined;
}

/** A stand-in of the hosted service: what the model handle calls, chat completions included (JSON or SSE). */
function hostedStandIn() {
  const requests: SeenRequest[] = [];
  let trained = false;
  const json = (body: unknown) => Response.json(body);
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = init?.method ?? 'GET';
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
    requests.push({
      method,
      host: url.host,
      path: url.pathname,
      authorization: new Headers(init?.headers).get('authorization'),
      body,
    });
    if (url.pathname.endsWith('/preview/models'))
      return json({
        id: MODEL_ID,
        entity: 'team',
        project: 'p',
        name: 'm',
        base_model: 'OpenPipe/Qwen3-14B-Instruct',
        run_id: null,
      });
    if (url.pathname.endsWith('/checkpoints')) {
      const data = trained ? [{ id: EVENT_ID, step: 1, metrics: {} }] : [];
      return json({ object: 'list', data, first_id: '', last_id: '', has_more: false });
    }
    if (url.pathname.endsWith('/training-jobs')) return json({ id: JOB_ID });
    if (url.pathname.endsWith('/events')) {
      trained = true;
      const data = [{ id: EVENT_ID, type: 'training_ended', data: {} }];
      return json({ object: 'list', data, first_id: '', last_id: '', has_more: false });
    }
    if (url.pathname.endsWith('/log')) return json({});
    if (url.pathname === '/v1/chat/completions' && method === 'POST') {
      const token = { token: 'hi', bytes: [104, 105], logprob: -0.25, top_logprobs: [] };
      const base = { id: 'chatcmpl-h', created: 1_700_000_000, model: String(body?.['model']) };
      if (body?.['stream'] !== true) {
        const choice = {
          index: 0,
          finish_reason: 'stop',
          message: { role: 'assistant', content: 'hi' },
          logprobs: { content: [token] },
        };
        return json({
          ...base,
          object: 'chat.completion',
          choices: [choice],
          usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
        });
      }
      const chunks = [
        {
          choices: [
            {
              index: 0,
              delta: { role: 'assistant', content: 'hi' },
              logprobs: { content: [token] },
              finish_reason: null,
            },
          ],
        },
        { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
      ];
      const text = chunks
        .map((chunk) => `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', ...chunk })}\n\n`)
        .join('');
      return new Response(`${text}data: [DONE]\n\n`, { headers: { 'content-type': 'text/event-stream' } });
    }
    return new Response(JSON.stringify({ detail: `not found: ${method} ${url.pathname}` }), { status: 404 });
  };
  return { fetch: fetch as typeof globalThis.fetch, requests };
}

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-hosted-translation-'));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

describe('the translations on the hosted path', () => {
  it('sends only chat completions to the hosted service, and trains on what they recorded', async () => {
    const service = hostedStandIn();
    const backend = new HostedBackend({ apiKey: WANDB_KEY, fetch: service.fetch, dataDir });
    const model = await new TrainableModel({
      project: 'p',
      name: 'm',
      baseModel: 'OpenPipe/Qwen3-14B-Instruct',
    }).register(backend);
    expect(model.anthropicBaseURL).toBe('https://api.training.wandb.ai');
    const groups = await gatherTrajectoryGroups(
      ['in-process', 'child'],
      async (where, context) => {
        if (where === 'in-process') {
          await model.openai().responses.create({ model: model.inferenceName(), input: 'Say hi.' });
          const openai = new OpenAI({
            baseURL: model.inferenceBaseURL,
            apiKey: model.inferenceApiKey,
            fetch: model.fetch(),
          });
          await openai.responses.stream({ model: model.inferenceName(), input: 'Again.' }).finalResponse();
          const anthropic = new Anthropic({
            baseURL: model.anthropicBaseURL,
            apiKey: model.inferenceApiKey,
            fetch: model.fetch(),
          });
          await anthropic.messages.create({
            model: model.inferenceName(),
            max_tokens: 4,
            messages: [{ role: 'user', content: 'Once more.' }],
          });
        } else {
          const { WANDB_API_KEY: _omitted, ...inherited } = process.env;
          expect(Object.values(context.endpoint.env)).not.toContain(WANDB_KEY);
          const output = await runChild(process.execPath, [CHILD, 'hosted'], { ...inherited, ...context.endpoint.env });
          expect(JSON.parse(output)).toMatchObject({ chat: 'stop', responses: 'completed', messages: 'end_turn' });
        }
        return { reward: context.groupIndex };
      },
      { model },
    );
    const inference = service.requests.filter((request) => !request.path.includes('/preview/'));
    expect(new Set(inference.map((request) => `${request.method} ${request.host}${request.path}`))).toEqual(
      new Set(['POST api.training.wandb.ai/v1/chat/completions']),
    );
    for (const request of inference) {
      expect(request.authorization).toBe(`Bearer ${WANDB_KEY}`);
      expect(request.body).toMatchObject({ model: model.inferenceName(), logprobs: true });
    }
    expect(inference).toHaveLength(6);

    const trajectories = groups.flatMap((group) => group.trajectories);
    for (const trajectory of trajectories) {
      const choices = [
        trajectory.messages_and_choices,
        ...trajectory.additional_histories.map((history) => history.messages_and_choices),
      ]
        .flat()
        .filter(isChoice);
      expect(choices).toHaveLength(3);
    }
    // Both groups go up (one rollout each: no variance within a group, so train a merged group).
    const merged: TrajectoryGroupInput = { trajectories };
    const { step } = await model.train([merged]);
    expect(step).toBe(1);
    const job = service.requests.find((request) => request.path.endsWith('/training-jobs'));
    const uploaded = job?.body?.['trajectory_groups'] as TrajectoryGroupInput[] | undefined;
    const uploadedChoices = uploaded?.[0]?.trajectories.flatMap((trajectory) =>
      (trajectory.messages_and_choices ?? []).filter(isChoice),
    );
    expect(uploadedChoices?.length).toBeGreaterThan(0);
    for (const choice of uploadedChoices ?? [])
      expect(choice).toMatchObject({ logprobs: { content: [{ token: 'hi', logprob: -0.25 }] } });
    await model.close();
  });
});
