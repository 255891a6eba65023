/**
 * What OpenPipe ART relies on that the OpenAPI documents do not state (test/art runs ART itself;
 * these keep the rules when no Python is at hand):
 * - `policy_token_spans` on chat completion choices: the provenance ART's PipelineTrainer requires
 *   of the hosted service (its evaluation fails with "Exact policy provenance is missing
 *   policy_token_spans" without it). Each choice says which step's weights sampled its tokens.
 * - the `wandb-artifact://` SFT URL that ART's `model.train_sft` sends is refused with a reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type TestApp } from './support/harness.js';
import { registerModel, sampledGroup, waitForJobEnd } from './support/jobs.js';

let server: TestApp;
beforeAll(async () => {
  server = await startApp();
});
afterAll(async () => {
  await server.close();
});

interface Span {
  start_token: number;
  end_token: number;
  generation_id: string;
  policy_version: number;
  lora_slot: string;
  update_seq: number;
}
interface Completion {
  id: string;
  choices: { index: number; logprobs: { content: unknown[] } | null; policy_token_spans?: Span[] }[];
  usage: { completion_tokens: number };
}

async function complete(model: string, extra: Record<string, unknown> = {}): Promise<Completion> {
  const response = await server.call<Completion>('POST', '/v1/chat/completions', {
    body: { model, messages: [{ role: 'user', content: 'abcd' }], max_tokens: 5, n: 3, ...extra },
  });
  expect(response.status, response.text).toBe(200);
  return response.body;
}

describe('policy_token_spans', () => {
  it('covers every completion token of each choice with the step that sampled it, logprobs asked or not', async () => {
    const model = await registerModel(server, 'spans');
    const name = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;

    const base = await complete(name, { logprobs: true });
    const lengths = base.choices.map((choice) => choice.logprobs?.content.length ?? 0);
    expect(lengths.reduce((sum, length) => sum + length, 0)).toBe(base.usage.completion_tokens);
    for (const choice of base.choices) {
      expect(choice.policy_token_spans).toEqual([
        {
          start_token: 0,
          end_token: choice.logprobs?.content.length,
          generation_id: `${base.id}:${choice.index}`,
          policy_version: 0,
          lora_slot: `${name}:step0`,
          update_seq: 0,
        },
      ]);
    }

    // Without logprobs the spans are still there (the service counts the tokens) and logprobs stay null.
    const plain = await complete(name);
    let spanned = 0;
    for (const choice of plain.choices) {
      expect(choice.logprobs).toBeNull();
      const [span] = choice.policy_token_spans ?? [];
      expect(span?.policy_version).toBe(0);
      spanned += span?.end_token ?? 0;
    }
    expect(spanned).toBe(plain.usage.completion_tokens);

    // After one RL step, the latest name samples step 1 and the pinned :step0 still step 0.
    const job = await server.call<{ id: string }>('POST', '/v1/preview/training-jobs', {
      body: { model_id: model.id, trajectory_groups: [await sampledGroup(server, name)] },
    });
    expect(job.status, job.text).toBe(200);
    expect((await waitForJobEnd(server, job.body.id)).status).toBe('COMPLETED');
    const latest = await complete(name, { logprobs: true });
    expect(latest.choices.map((choice) => choice.policy_token_spans?.[0]?.policy_version)).toEqual([1, 1, 1]);
    expect(latest.choices[0]?.policy_token_spans?.[0]?.lora_slot).toBe(`${name}:step1`);
    const pinned = await complete(`${name}:step0`);
    expect(pinned.choices.map((choice) => choice.policy_token_spans?.[0]?.policy_version)).toEqual([0, 0, 0]);

    // A base model id is step 0 of itself.
    const baseModel = await complete('policyloop/tiny-chat');
    expect(baseModel.choices[0]?.policy_token_spans?.[0]).toMatchObject({
      policy_version: 0,
      lora_slot: 'policyloop/tiny-chat',
    });
  });
});

describe("SFT from a W&B artifact (what ART's model.train_sft sends)", () => {
  it('is a 422 at training_data_url that says the service cannot read W&B artifacts and what to send instead', async () => {
    const model = await registerModel(server, 'sft-artifact');
    const response = await server.call('POST', '/v1/preview/sft-training-jobs', {
      body: { model_id: model.id, training_data_url: 'wandb-artifact:///local/server-tests/rows:v0', config: {} },
    });
    expect(response.status).toBe(422);
    const [issue] = response.body.detail;
    expect(issue.loc).toEqual(['body', 'training_data_url']);
    expect(issue.msg).toContain('W&B artifact');
    expect(issue.msg).toContain('file:// or data: URL');
    // No job was queued: the model is still at step 0.
    const page = await server.call('GET', `/v1/preview/models/${model.id}/checkpoints`);
    expect(page.body.data).toEqual([]);
  });
});
