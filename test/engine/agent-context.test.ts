/**
 * A realistic small agent on the local service: a system prompt, three tools and four turns
 * (~6,000 characters) fit `policyloop/agent-chat`, are sampled with logprobs (every token with a
 * `top_logprobs` array, as the AI SDK's parser requires), and an RL job trains on such rollouts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService } from 'policyloop/testing';
import type { TestService } from 'policyloop/testing';
import { AGENT_TOOLS, agentAnswer, agentMessages } from './support/agent-prompt.js';

let service: TestService;
beforeAll(async () => {
  service = await startTestService();
});
afterAll(async () => {
  await service?.close();
});

async function call(method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${service.baseURL}${route}`, {
    method,
    headers: { authorization: `Bearer ${service.apiKey}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text.startsWith('data:') ? text : JSON.parse(text) };
}

async function waitForJob(jobId: string): Promise<Record<string, number>> {
  let after = '';
  let metrics: Record<string, number> = {};
  for (let attempt = 0; attempt < 3000; attempt += 1) {
    const page = await call('GET', `/preview/training-jobs/${jobId}/events?limit=100${after ? `&after=${after}` : ''}`);
    for (const event of page.body.data as { id: string; type: string; data: Record<string, number> }[]) {
      after = event.id;
      if (event.type === 'gradient_step') metrics = event.data;
      if (event.type === 'training_ended') return metrics;
      if (event.type === 'training_failed') throw new Error(`training failed: ${JSON.stringify(event.data)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`job ${jobId} did not end`);
}

const request = (model: string, variant: number, extra: Record<string, unknown> = {}) => ({
  model,
  messages: agentMessages(variant),
  tools: AGENT_TOOLS,
  max_tokens: 12,
  temperature: 1,
  logprobs: true,
  seed: variant,
  ...extra,
});

describe('an agent prompt on policyloop/agent-chat', () => {
  it('is listed as a base model', async () => {
    const listed = await call('GET', '/preview/base-models');
    expect(listed.body).toContain('policyloop/agent-chat');
    expect(listed.body).toContain('policyloop/tiny-chat');
  });

  it('fits agent-chat (while tiny-chat answers 422) and samples logprobs with top_logprobs on every token', async () => {
    const tooLong = await call('POST', '/chat/completions', request('policyloop/tiny-chat', 0));
    expect(tooLong.status).toBe(422);
    const answered = await call('POST', '/chat/completions', request('policyloop/agent-chat', 0, { n: 2 }));
    expect(answered.status).toBe(200);
    expect(answered.body.usage.prompt_tokens).toBeLessThan(2600);
    for (const choice of answered.body.choices) {
      expect(choice.logprobs.content.length).toBeGreaterThan(0);
      for (const token of choice.logprobs.content) {
        expect(token.top_logprobs).toEqual([]);
        expect(token.bytes.length).toBeGreaterThan(0);
      }
    }
    const streamed = await call('POST', '/chat/completions', request('policyloop/agent-chat', 1, { stream: true }));
    expect(streamed.status).toBe(200);
    const entries = (streamed.body as string)
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .flatMap((line) => JSON.parse(line.slice(6)).choices.flatMap((choice: any) => choice.logprobs?.content ?? []));
    expect(entries.length).toBeGreaterThan(0);
    for (const entry of entries) expect(Array.isArray(entry.top_logprobs)).toBe(true);
  });

  it('trains an RL job on agent rollouts, with the logprobs training sees matching the sampled ones', async () => {
    const model = await call('POST', '/preview/models', {
      project: 'agent-context',
      name: 'harbor',
      base_model: 'policyloop/agent-chat',
    });
    expect(model.status).toBe(200);
    const inferenceName = `wandb-artifact:///${model.body.entity}/${model.body.project}/${model.body.name}`;
    const groups = await Promise.all(
      [0, 1].map(async (variant) => {
        const result = await call('POST', '/chat/completions', request(inferenceName, variant, { n: 4 }));
        expect(result.status).toBe(200);
        return {
          trajectories: result.body.choices.map((choice: unknown, index: number) => ({
            messages_and_choices: [...agentMessages(variant), choice],
            tools: AGENT_TOOLS,
            reward: index % 2,
          })),
        };
      }),
    );
    const job = await call('POST', '/preview/training-jobs', { model_id: model.body.id, trajectory_groups: groups });
    expect(job.status).toBe(200);
    const metrics = await waitForJob(job.body.id);
    expect(metrics['num_groups_trainable']).toBe(2);
    expect(metrics['num_trainable_tokens']).toBeGreaterThan(0);
    // Sampling and training use the same sliding window: the importance ratio starts at 1.
    expect(Math.abs(metrics['kl_div'] ?? 1)).toBeLessThan(1e-3);
    const after = await call('POST', '/chat/completions', request(inferenceName, 2));
    expect(after.status).toBe(200);
    expect(after.body.choices[0].logprobs.content.length).toBeGreaterThan(0);
  });

  it('trains an SFT job on agent demonstrations (a warm start before RL)', async () => {
    const model = await call('POST', '/preview/models', {
      project: 'agent-context',
      name: 'harbor-sft',
      base_model: 'policyloop/agent-chat',
    });
    const rows = [0, 1, 2].map((variant) => ({
      messages: [...agentMessages(variant), { role: 'assistant', content: agentAnswer(variant) }],
      tools: AGENT_TOOLS,
    }));
    const training = rows.map((row) => JSON.stringify(row)).join('\n');
    const job = await call('POST', '/preview/sft-training-jobs', {
      model_id: model.body.id,
      training_data_url: `data:application/jsonl;base64,${Buffer.from(training).toString('base64')}`,
      config: { batch_size: 3, learning_rate: 5e-3, assistant_turns: 'last' },
    });
    expect(job.status).toBe(200);
    const metrics = await waitForJob(job.body.id);
    expect(metrics['num_trainable_tokens']).toBeGreaterThan(3 * 40);
    expect(metrics['num_sequences_truncated']).toBe(0);
  });
});
