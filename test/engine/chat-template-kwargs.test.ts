/**
 * `chat_template_kwargs` on the local engine's real-model path: a tiny Qwen3 with the real Qwen3
 * tokenizer and chat template renders `enable_thinking: false` as transformers does (the empty
 * `<think>` block in the generation prompt, test/fixtures/reference/chat-templates.json), whether
 * the variables come from the model's `chatTemplateKwargs` or from the request, and an RL step
 * trains on the prompt the sampler saw.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LocalBackend, TrainableModel } from 'policyloop';
import { TrajectoryGroup as TrajectoryGroupSchema } from 'policyloop/schema';
import type { Choice, TrajectoryGroup } from 'policyloop/schema';
import { writeTinyQwen3 } from 'policyloop/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHfRlData } from '../../src/engine/hf/training-data.js';
import { loadTextLayer } from '../../src/text/text-layer.js';
import type { TextLayer } from '../../src/text/text-layer.js';

interface FixtureCase {
  name: string;
  messages: { role: 'user'; content: string }[];
  template_variables: Record<string, unknown>;
  text: string;
  ids: number[];
}
const fixture = JSON.parse(readFileSync('test/fixtures/reference/chat-templates.json', 'utf8')) as {
  cases: FixtureCase[];
};
const thinkingOff = fixture.cases.find((entry) => entry.name === 'qwen3 thinking disabled') as FixtureCase;

type TokenChoice = Choice & { prompt_token_ids?: number[]; token_ids?: number[] };

let directory: string;
let backend: LocalBackend;
let modelDir: string;
let text: TextLayer;

beforeAll(async () => {
  directory = await mkdtemp(path.join(tmpdir(), 'chat-template-kwargs-'));
  modelDir = await writeTinyQwen3(path.join(directory, 'tiny-qwen3'));
  text = await loadTextLayer(modelDir);
  backend = await LocalBackend.start({ dataDir: path.join(directory, 'data'), models: [modelDir] });
}, 120_000);
afterAll(async () => {
  await backend?.close();
  if (directory !== undefined) await rm(directory, { recursive: true, force: true });
});

describe('chat_template_kwargs on a real model of the local engine', () => {
  it('the fixture has transformers’ thinking-off prompt, which ends in the empty think block', () => {
    expect(thinkingOff.template_variables).toEqual({ enable_thinking: false });
    expect(thinkingOff.text.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('the model option renders every request as transformers does with enable_thinking=False; a request’s own wins', async () => {
    const model = await new TrainableModel({
      project: 'kwargs',
      name: 'thinking-off',
      baseModel: modelDir,
      chatTemplateKwargs: { enable_thinking: false },
    }).register(backend);
    const client = model.openai();
    const off = await client.chat.completions.create({
      model: model.inferenceName(),
      messages: thinkingOff.messages,
      max_tokens: 2,
    });
    const choice = off.choices[0] as TokenChoice;
    expect(choice.prompt_token_ids).toEqual(thinkingOff.ids);
    expect(text.decode(choice.prompt_token_ids ?? [])).toBe(thinkingOff.text);
    expect(off.usage?.prompt_tokens).toBe(thinkingOff.ids.length);

    const on = await client.chat.completions.create({
      model: model.inferenceName(),
      messages: thinkingOff.messages,
      max_tokens: 2,
      chat_template_kwargs: { enable_thinking: true },
    } as Parameters<typeof client.chat.completions.create>[0] & { chat_template_kwargs: object });
    const withThinking = text.encode(text.renderChat(thinkingOff.messages, { addGenerationPrompt: true }));
    expect((on as { usage?: { prompt_tokens: number } }).usage?.prompt_tokens).toBe(withThinking.length);
    expect(withThinking.length).toBeLessThan(thinkingOff.ids.length);
    await model.close();
  });

  it('without the option a request is rendered with thinking, and its choice carries no token ids', async () => {
    const model = await new TrainableModel({ project: 'kwargs', name: 'default', baseModel: modelDir }).register(
      backend,
    );
    const reply = await model.openai().chat.completions.create({
      model: model.inferenceName(),
      messages: thinkingOff.messages,
      max_tokens: 2,
    });
    expect(reply.usage?.prompt_tokens).toBe(
      text.encode(text.renderChat(thinkingOff.messages, { addGenerationPrompt: true })).length,
    );
    expect((reply.choices[0] as TokenChoice).prompt_token_ids).toBeUndefined();
    await model.close();
  });

  it('an RL step trains on the thinking-off prompt it sampled from, not on one rendered again', async () => {
    const model = await new TrainableModel({
      project: 'kwargs',
      name: 'train',
      baseModel: modelDir,
      chatTemplateKwargs: { enable_thinking: false },
    }).register(backend);
    const reply = await model.openai().chat.completions.create({
      model: model.inferenceName(),
      messages: thinkingOff.messages,
      max_tokens: 3,
      n: 2,
      temperature: 1,
    });
    const group: TrajectoryGroup = {
      trajectories: reply.choices.map((choice, index) => ({
        messages_and_choices: [...thinkingOff.messages, choice],
        reward: index,
      })),
    } as unknown as TrajectoryGroup;
    // What the engine's trainer builds from the group: each sequence starts with the sampled prompt.
    const data = buildHfRlData([TrajectoryGroupSchema.parse(group)], null, text);
    expect(data.sequences).toHaveLength(2);
    for (const sequence of data.sequences)
      expect(sequence.tokens.slice(0, thinkingOff.ids.length)).toEqual(thinkingOff.ids);
    const { step } = await model.train([group], { learningRate: 1e-3 });
    expect(step).toBe(1);
    await model.close();
  }, 120_000);
});
