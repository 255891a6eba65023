/**
 * `SFTRow` takes the openai SDK's own types: messages, function tools and custom tools type-check
 * without a cast (tsc runs over test/ in `npm test`), and the rows also parse at run time.
 */
import type OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { SFTRow } from 'policyloop/schema';

const messages: OpenAI.ChatCompletionMessageParam[] = [
  { role: 'system', content: [{ type: 'text', text: 'Be brief.' }] },
  { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
  {
    role: 'assistant',
    content: null,
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  },
  { role: 'tool', tool_call_id: 'c1', content: '21C' },
  { role: 'assistant', content: '21C in Paris.' },
];
const functionTools: OpenAI.ChatCompletionFunctionTool[] = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' }, strict: null } },
];
const anyTools: OpenAI.ChatCompletionTool[] = [
  ...functionTools,
  {
    type: 'custom',
    custom: { name: 'sql', format: { type: 'grammar', grammar: { syntax: 'lark', definition: 'start: "x"' } } },
  },
];

describe('SFTRow and the openai SDK types', () => {
  it('accepts OpenAI messages with ChatCompletionFunctionTool[] or ChatCompletionTool[] tools, no cast', () => {
    const withFunctions: SFTRow = { messages, tools: functionTools };
    const withAny: SFTRow = { messages, tools: anyTools };
    expect(SFTRow.safeParse(withFunctions).success).toBe(true);
    expect(SFTRow.safeParse(withAny).success).toBe(true);
  });

  it('still refuses, at compile time, a tool of an unknown type', () => {
    // @ts-expect-error `type` must be 'function' or 'custom'
    const row: SFTRow = { messages, tools: [{ type: 'web_search', function: { name: 'f' } }] };
    expect(SFTRow.safeParse(row).success).toBe(false);
  });
});
