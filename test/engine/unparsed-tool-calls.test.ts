/**
 * A reply that holds tool-call markup the model's parser does not read (another family's format,
 * or its own written wrong) is flagged, never silently text: the Choice of a request with tools
 * names the markup's family (`unparsed_tool_call`), the trajectory counts such replies in its
 * `tool_calls/unparsed` metric (so the step's `train/tool_calls/unparsed`), and a gather warns
 * once through its events (library code writes nothing to the console). With the real Qwen3 and
 * Llama 3.1 tokenizers and templates.
 */
import { rm } from 'node:fs/promises';
import { captureCompletions, gatherTrajectoryGroups } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { scriptedChatClient } from 'policyloop/testing';
import { GatherEmitter, type RolloutWarningEvent } from 'policyloop/training';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHfChoice } from '../../src/text/choice.js';
import { loadTextLayer, type TextLayer } from '../../src/text/text-layer.js';
import { referenceFolder } from './support/hf-folders.js';

const WEATHER = {
  type: 'function' as const,
  function: { name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};
const folders: string[] = [];
let qwen: TextLayer;
let llama: TextLayer;

beforeAll(async () => {
  folders.push(await referenceFolder('qwen3'), await referenceFolder('llama3.1'));
  qwen = await loadTextLayer(folders[0] as string);
  llama = await loadTextLayer(folders[1] as string);
}, 60_000);
afterAll(async () => {
  for (const folder of folders) await rm(folder, { recursive: true, force: true });
});

function choiceOf(text: TextLayer, reply: string, tools = [WEATHER]): Choice & { unparsed_tool_call?: string } {
  return buildHfChoice({ tokens: [], logprobs: [], alternatives: [], text: reply, finishReason: 'stop' }, 0, {
    logprobs: false,
    tokensAsIds: false,
    parseTools: tools.length > 0,
    makeId: () => 'call_1',
    text,
    tools,
  });
}

describe('tool-call markup the parser does not read', () => {
  it.each([
    [
      'Qwen3 writing Mistral’s format',
      'qwen3',
      '[TOOL_CALLS][{"name": "weather", "arguments": {"city": "Paris"}}]',
      'mistral',
    ],
    ['Qwen3 writing Llama’s JSON', 'qwen3', '{"name": "weather", "parameters": {"city": "Paris"}}', 'llama3-json'],
    [
      'Qwen3 writing an unclosed block of its own',
      'qwen3',
      '<tool_call>\n{"name": "weather", "arguments": {"city":',
      'hermes',
    ],
    [
      'Llama 3.1 writing Qwen’s <tool_call>',
      'llama3.1',
      '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>',
      'hermes',
    ],
    [
      'Llama 3.1 writing functionary’s <function=...>',
      'llama3.1',
      '<function=weather>{"city": "Paris"}</function>',
      'functionary',
    ],
  ] as const)('%s: text, flagged with the markup’s family', (_name, model, reply, family) => {
    const choice = choiceOf(model === 'qwen3' ? qwen : llama, reply);
    expect(choice.message.tool_calls).toBeUndefined();
    expect(choice.message.content).toBe(reply);
    expect(choice.unparsed_tool_call).toBe(family);
  });

  it('a call in the family’s own format is parsed and not flagged; plain text is not flagged', () => {
    const parsed = choiceOf(qwen, '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    expect(parsed.message.tool_calls).toHaveLength(1);
    expect(parsed.unparsed_tool_call).toBeUndefined();
    expect(choiceOf(qwen, 'It is sunny in Paris.').unparsed_tool_call).toBeUndefined();
    // Without tools in the request nothing is parsed as a call, so nothing is flagged.
    expect(choiceOf(qwen, '[TOOL_CALLS][{"name": "weather"}]', []).unparsed_tool_call).toBeUndefined();
  });

  it('the trajectory counts flagged replies, and the gather warns once', async () => {
    const flagged = { ...choiceOf(qwen, '[TOOL_CALLS][{"name": "weather", "arguments": {}}]'), logprobs: null };
    const plain = { ...choiceOf(qwen, 'Sunny.'), logprobs: null };
    const client = captureCompletions(scriptedChatClient([flagged, flagged, plain, flagged], { loop: true }));
    const events = new GatherEmitter();
    const warnings: RolloutWarningEvent[] = [];
    events.on('rollout:warning', (event) => warnings.push(event));
    const groups = await gatherTrajectoryGroups(
      ['Paris', 'Lyon'],
      async (city: string) => {
        for (let turn = 0; turn < 2; turn += 1)
          await client.chat.completions.create({
            model: 'm',
            messages: [{ role: 'user', content: `Weather in ${city}?` }],
            tools: [WEATHER],
          });
        return { reward: 1 };
      },
      { groupSize: 1, concurrency: 1, events },
    );
    const counts = groups.map((group) => group.trajectories[0]?.metrics?.['tool_calls/unparsed']);
    expect(counts).toEqual([2, 1]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.code).toBe('unparsed_tool_call');
    expect(warnings[0]?.message).toContain('(mistral)');
  });
});
