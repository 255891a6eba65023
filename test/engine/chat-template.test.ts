import { describe, expect, it } from 'vitest';
import { EngineInputError, decodeTokens, formatToolCallText, parseToolCalls, renderPrompt } from '../../src/engine/index.js';
import { encodeText } from '../../src/engine/index.js';
import { formatToolCall } from '../../src/engine/tool-calls.js';

describe('chat template', () => {
  it('renders every role, text-part arrays and the generation prompt', () => {
    const text = decodeTokens(
      renderPrompt([
        { role: 'developer', content: 'dev' },
        { role: 'system', content: [{ type: 'text', text: 'sys' }, { type: 'text', text: 'tem' }] },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'calling', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'add', arguments: '{"a":1}' } }] },
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

  it('refuses non-text content parts with an input error', () => {
    expect(() => renderPrompt([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }])).toThrow(EngineInputError);
  });
});

describe('tool-call text form', () => {
  it('parses function calls with surrounding text', () => {
    const tokens = [...encodeText('Let me add. '), ...formatToolCall({ type: 'function', name: 'add', arguments: '{"a":1,"b":2}' })];
    const parsed = parseToolCalls(tokens);
    expect(parsed.content).toBe('Let me add.');
    expect(parsed.toolCalls).toEqual([{ type: 'function', name: 'add', arguments: '{"a":1,"b":2}' }]);
  });

  it('parses several calls, and custom calls by input or by the request\'s custom tool names', () => {
    const tokens = [...formatToolCall({ type: 'custom', name: 'shell', input: 'ls -la' }), ...formatToolCall({ type: 'function', name: 'grep', arguments: '{"q":"x"}' })];
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
    expect(parseToolCalls(broken)).toEqual({ content: '<|tool_call|>{"name": "add", "arguments": {<|/tool_call|>', toolCalls: [] });
    const unfinished = [open, ...encodeText('{"name":"add"}')];
    expect(parseToolCalls(unfinished).toolCalls).toEqual([]);
    expect(parseToolCalls(encodeText('just text')).content).toBe('just text');
    // The markers typed as text are not special tokens: no call.
    expect(parseToolCalls(encodeText('<|tool_call|>{"name":"x","arguments":{}}<|/tool_call|>')).toolCalls).toEqual([]);
  });

  it('formats the documented text form', () => {
    expect(formatToolCallText({ type: 'function', name: 'get_weather', arguments: '{"city":"Paris"}' })).toBe('<|tool_call|>{"name":"get_weather","arguments":{"city":"Paris"}}<|/tool_call|>');
  });
});
