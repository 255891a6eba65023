import { describe, expect, it } from 'vitest';
import {
  EngineInputError,
  decodeTokens,
  formatToolCallText,
  parseToolCalls,
  renderPrompt,
} from '../../src/engine/index.js';
import { encodeText } from '../../src/engine/index.js';
import { formatToolCall } from '../../src/engine/tool-calls.js';
import { buildChoice } from '../../src/engine/completion.js';
import type { GeneratedSequence } from '../../src/engine/sampler.js';
import { END_TOKEN_ID } from '../../src/engine/tokenizer.js';

describe('chat template', () => {
  it('renders every role, text-part arrays and the generation prompt', () => {
    const text = decodeTokens(
      renderPrompt([
        { role: 'developer', content: 'dev' },
        {
          role: 'system',
          content: [
            { type: 'text', text: 'sys' },
            { type: 'text', text: 'tem' },
          ],
        },
        { role: 'user', content: 'hi' },
        {
          role: 'assistant',
          content: 'calling',
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":1}' } }],
        },
        { role: 'tool', content: '2', tool_call_id: 'c1' },
        { role: 'function', name: 'add', content: '3' },
      ]),
    );
    expect(text).toBe(
      '<|developer|>dev<|end|><|system|>system<|end|><|user|>hi<|end|>' +
        '<|assistant|>calling<|tool_call|>{"name":"add","arguments":{"a":1}}<|/tool_call|><|end|>' +
        '<|tool|>2<|end|><|function|>add\n3<|end|><|assistant|>',
    );
  });

  it('renders tool definitions first, function and custom', () => {
    const text = decodeTokens(
      renderPrompt(
        [{ role: 'user', content: 'x' }],
        [
          { type: 'function', function: { name: 'add', description: 'adds', parameters: { type: 'object' } } },
          { type: 'custom', custom: { name: 'shell', description: 'runs' } },
        ],
      ),
    );
    expect(text).toBe(
      '<|tools|>{"type":"function","name":"add","description":"adds","parameters":{"type":"object"}}\n{"type":"custom","name":"shell","description":"runs"}<|end|><|user|>x<|end|><|assistant|>',
    );
  });

  it('renders custom and legacy function calls of assistant messages, and refusal parts as text', () => {
    const text = decodeTokens(
      renderPrompt([
        {
          role: 'assistant',
          content: [{ type: 'refusal', refusal: 'no' }],
          tool_calls: [{ id: 'c', type: 'custom', custom: { name: 'shell', input: 'ls' } }],
        },
        { role: 'assistant', content: null, function_call: { name: 'add', arguments: 'not json' } },
      ]),
    );
    expect(text).toBe(
      '<|assistant|>no<|tool_call|>{"name":"shell","input":"ls"}<|/tool_call|><|end|><|assistant|><|tool_call|>{"name":"add","arguments":"not json"}<|/tool_call|><|end|><|assistant|>',
    );
  });

  it('refuses non-text content parts with an input error', () => {
    expect(() =>
      renderPrompt([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }]),
    ).toThrow(EngineInputError);
  });
});

describe('tool-call text form', () => {
  it('parses function calls with surrounding text', () => {
    const tokens = [
      ...encodeText('Let me add. '),
      ...formatToolCall({ type: 'function', name: 'add', arguments: '{"a":1,"b":2}' }),
    ];
    const parsed = parseToolCalls(tokens);
    expect(parsed.content).toBe('Let me add.');
    expect(parsed.toolCalls).toEqual([{ type: 'function', name: 'add', arguments: '{"a":1,"b":2}' }]);
  });

  it("parses several calls, and custom calls by input or by the request's custom tool names", () => {
    const tokens = [
      ...formatToolCall({ type: 'custom', name: 'shell', input: 'ls -la' }),
      ...formatToolCall({ type: 'function', name: 'grep', arguments: '{"q":"x"}' }),
    ];
    const parsed = parseToolCalls(tokens, new Set(['grep']));
    expect(parsed.content).toBeNull();
    expect(parsed.toolCalls).toEqual([
      { type: 'custom', name: 'shell', input: 'ls -la' },
      { type: 'custom', name: 'grep', input: '{"q":"x"}' },
    ]);
  });

  it('keeps unparseable output as plain content', () => {
    const open = formatToolCall({ type: 'function', name: 'a', arguments: '{}' })[0] as number;
    const close = formatToolCall({ type: 'function', name: 'a', arguments: '{}' }).at(-1) as number;
    const broken = [open, ...encodeText('{"name": "add", "arguments": {'), close];
    expect(parseToolCalls(broken)).toEqual({
      content: '<|tool_call|>{"name": "add", "arguments": {<|/tool_call|>',
      toolCalls: [],
    });
    const unfinished = [open, ...encodeText('{"name":"add"}')];
    expect(parseToolCalls(unfinished).toolCalls).toEqual([]);
    expect(parseToolCalls(encodeText('just text')).content).toBe('just text');
    // The markers typed as text are not special tokens: no call.
    expect(parseToolCalls(encodeText('<|tool_call|>{"name":"x","arguments":{}}<|/tool_call|>')).toolCalls).toEqual([]);
  });

  it('formats the documented text form', () => {
    expect(formatToolCallText({ type: 'function', name: 'get_weather', arguments: '{"city":"Paris"}' })).toBe(
      '<|tool_call|>{"name":"get_weather","arguments":{"city":"Paris"}}<|/tool_call|>',
    );
  });
});

describe('choices built from sampled tokens', () => {
  const sequenceOf = (tokens: number[]): GeneratedSequence => ({
    tokens,
    logprobs: tokens.map(() => -0.5),
    alternatives: tokens.map(() => []),
    text: decodeTokens(tokens.filter((id) => id !== END_TOKEN_ID)),
    finishReason: 'stop',
    sampledCount: tokens.length,
  });
  let ids = 0;
  const options = {
    logprobs: true,
    tokensAsIds: false,
    parseTools: true,
    customToolNames: new Set(['shell']),
    makeId: () => `call_${(ids += 1)}`,
  };

  it('turns function and custom calls into OpenAI tool_calls with finish_reason tool_calls', () => {
    const tokens = [
      ...encodeText('Running. '),
      ...formatToolCall({ type: 'custom', name: 'shell', input: 'ls -la' }),
      ...formatToolCall({ type: 'function', name: 'add', arguments: '{"a":1}' }),
      // A custom tool of the request called with `arguments` is still a custom call.
      ...formatToolCall({ type: 'function', name: 'shell', arguments: '{"cmd":"pwd"}' }),
      END_TOKEN_ID,
    ];
    const choice = buildChoice(sequenceOf(tokens), 0, options);
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBe('Running.');
    expect(choice.message.tool_calls).toEqual([
      { id: expect.stringMatching(/^call_/), type: 'custom', custom: { name: 'shell', input: 'ls -la' } },
      { id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'add', arguments: '{"a":1}' } },
      { id: expect.stringMatching(/^call_/), type: 'custom', custom: { name: 'shell', input: '{"cmd":"pwd"}' } },
    ]);
    // The logprobs still cover every sampled token, markers and <|end|> included.
    expect(choice.logprobs?.content?.map((entry) => entry.token).join('')).toBe(
      decodeTokens(tokens).replace(/[^\x20-\x7e]/g, ''),
    );
  });

  it('keeps the text form as content when tools are not parsed (no tools, or tool_choice "none") or a block is broken', () => {
    const call = formatToolCall({ type: 'function', name: 'add', arguments: '{}' });
    const plain = buildChoice(sequenceOf([...call, END_TOKEN_ID]), 0, { ...options, parseTools: false });
    expect(plain.finish_reason).toBe('stop');
    expect(plain.message.content).toBe('<|tool_call|>{"name":"add","arguments":{}}<|/tool_call|>');
    expect(plain.message.tool_calls).toBeUndefined();
    const broken = buildChoice(sequenceOf([...call.slice(0, -3), call.at(-1) as number, END_TOKEN_ID]), 0, options);
    expect(broken.finish_reason).toBe('stop');
    expect(broken.message.tool_calls).toBeUndefined();
    expect(broken.message.content).toBe('<|tool_call|>{"name":"add","arguments":{<|/tool_call|>');
  });
});
