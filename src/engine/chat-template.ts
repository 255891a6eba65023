/**
 * The chat template: how messages and tool definitions become token ids.
 *
 * ```
 * <|tools|>{"type":"function","name":...,"description":...,"parameters":...}\n...<|end|>   (only with tools)
 * <|system|>text<|end|>          (developer messages use <|developer|>)
 * <|user|>text<|end|>
 * <|assistant|>text<|tool_call|>{"name":...,"arguments":{...}}<|/tool_call|><|end|>
 * <|tool|>text<|end|>
 * <|function|>name\ntext<|end|>
 * <|assistant|>                  (the generation prompt: the model writes the rest, then <|end|>)
 * ```
 * Text content may be a string or an array of text parts (joined without separator); other part
 * types (images, audio, files) are refused, since the engine is text only.
 */
import type { ChatCompletionMessageParam, ChatCompletionToolParam } from '../schema/index.js';
import { formatToolCall } from './tool-calls.js';
import type { ParsedToolCall } from './tool-calls.js';
import { BYTE_TOKENIZER, END_TOKEN_ID, specialTokenId } from './tokenizer.js';
import type { SpecialToken, Tokenizer } from './tokenizer.js';
import { EngineInputError } from './types.js';
import { pushAll } from '../internal/arrays.js';

/** A tool definition as the template accepts it (function or custom). */
export type TemplateTool = ChatCompletionToolParam;

/** A run of tokens the trainer learns (an assistant turn or a sampled Choice). */
export interface TrainableSpan {
  /** Index of the first trainable token. */
  readonly start: number;
  /** Index after the last trainable token. */
  readonly end: number;
}

function textOf(content: unknown, where: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown, index) => {
        const record = (part ?? {}) as Record<string, unknown>;
        if (record['type'] === 'text' && typeof record['text'] === 'string') return record['text'];
        if (record['type'] === 'refusal' && typeof record['refusal'] === 'string') return record['refusal'];
        throw new EngineInputError(
          `The engine reads text only: expected a text content part at ${where}.content[${index}], got type ${JSON.stringify(record['type'])}.`,
        );
      })
      .join('');
  }
  throw new EngineInputError(
    `Expected ${where}.content to be a string or an array of text parts, got ${typeof content}.`,
  );
}

/** Tool calls of an assistant message in the template's form. */
export function assistantToolCalls(message: Record<string, unknown>): ParsedToolCall[] {
  const calls: ParsedToolCall[] = [];
  const toolCalls = message['tool_calls'];
  if (Array.isArray(toolCalls)) {
    for (const raw of toolCalls) {
      const call = (raw ?? {}) as Record<string, unknown>;
      const custom = call['custom'] as Record<string, unknown> | undefined;
      const fn = call['function'] as Record<string, unknown> | undefined;
      if (call['type'] === 'custom' && custom) {
        calls.push({ type: 'custom', name: String(custom['name'] ?? ''), input: String(custom['input'] ?? '') });
      } else if (fn) {
        calls.push({ type: 'function', name: String(fn['name'] ?? ''), arguments: String(fn['arguments'] ?? '') });
      }
    }
  }
  const legacy = message['function_call'] as Record<string, unknown> | null | undefined;
  if (legacy)
    calls.push({ type: 'function', name: String(legacy['name'] ?? ''), arguments: String(legacy['arguments'] ?? '') });
  return calls;
}

/** Tokens of an assistant turn's body (content then tool calls), without role or end token. */
export function assistantBodyTokens(
  message: Record<string, unknown>,
  where = 'assistant message',
  tokenizer: Tokenizer = BYTE_TOKENIZER,
): number[] {
  const tokens = tokenizer.encodeText(textOf(message['content'], where));
  for (const call of assistantToolCalls(message)) pushAll(tokens, formatToolCall(call, tokenizer));
  return tokens;
}

const ROLE_TOKENS: Record<string, SpecialToken> = {
  system: '<|system|>',
  developer: '<|developer|>',
  user: '<|user|>',
  assistant: '<|assistant|>',
  tool: '<|tool|>',
  function: '<|function|>',
};

/** Builds a token sequence turn by turn, remembering which spans are trainable. */
export class TemplateBuilder {
  /** The tokens so far. */
  readonly tokens: number[] = [];
  /** Spans the trainer learns, in order. */
  readonly spans: TrainableSpan[] = [];

  /** @param tokenizer How text becomes tokens (the base model's tokenizer). */
  constructor(readonly tokenizer: Tokenizer = BYTE_TOKENIZER) {}

  /** Appends the tool definitions block (nothing when there are no tools). */
  appendTools(tools: readonly TemplateTool[] | null | undefined): this {
    if (!tools || tools.length === 0) return this;
    const lines = tools.map((tool) => {
      const record = tool as Record<string, unknown>;
      if (record['type'] === 'custom') {
        const custom = (record['custom'] ?? {}) as Record<string, unknown>;
        return JSON.stringify({ type: 'custom', name: custom['name'], description: custom['description'] });
      }
      const fn = (record['function'] ?? {}) as Record<string, unknown>;
      return JSON.stringify({
        type: 'function',
        name: fn['name'],
        description: fn['description'],
        parameters: fn['parameters'],
      });
    });
    this.tokens.push(specialTokenId('<|tools|>'));
    pushAll(this.tokens, this.tokenizer.encodeText(lines.join('\n'))).push(END_TOKEN_ID);
    return this;
  }

  /**
   * Appends one message. An assistant message's body and end token form a span that is marked
   * trainable when `trainable` is true.
   */
  appendMessage(
    message: ChatCompletionMessageParam | Record<string, unknown>,
    trainable = false,
    where = 'message',
  ): this {
    const record = message as Record<string, unknown>;
    const role = String(record['role']);
    const roleToken = ROLE_TOKENS[role];
    if (!roleToken)
      throw new EngineInputError(
        `Expected ${where}.role to be one of ${Object.keys(ROLE_TOKENS).join(', ')}, got ${JSON.stringify(record['role'])}.`,
      );
    this.tokens.push(specialTokenId(roleToken));
    if (role === 'assistant') {
      const body = assistantBodyTokens(record, where, this.tokenizer);
      body.push(END_TOKEN_ID);
      this.appendTokens(body, trainable);
      return this;
    }
    if (role === 'function') pushAll(this.tokens, this.tokenizer.encodeText(`${String(record['name'] ?? '')}\n`));
    // Loops, not `push(...tokens)`: a long message has more tokens than a call has room for arguments.
    pushAll(this.tokens, this.tokenizer.encodeText(textOf(record['content'], where))).push(END_TOKEN_ID);
    return this;
  }

  /** Appends the generation prompt `<|assistant|>`. */
  appendGenerationPrompt(): this {
    this.tokens.push(specialTokenId('<|assistant|>'));
    return this;
  }

  /** Appends raw tokens, as one trainable span when `trainable`. */
  appendTokens(ids: readonly number[], trainable: boolean): this {
    const start = this.tokens.length;
    pushAll(this.tokens, ids);
    if (trainable && ids.length > 0) this.spans.push({ start, end: this.tokens.length });
    return this;
  }
}

/**
 * Token ids of a chat-completions prompt: tools, messages, then the generation prompt, with the
 * base model's tokenizer (the byte tokenizer by default).
 *
 * @example
 * renderPrompt([{ role: 'user', content: 'hi' }]);
 * // tokens of `<|user|>hi<|end|><|assistant|>`
 */
export function renderPrompt(
  messages: readonly (ChatCompletionMessageParam | Record<string, unknown>)[],
  tools?: readonly TemplateTool[] | null,
  tokenizer: Tokenizer = BYTE_TOKENIZER,
): number[] {
  const builder = new TemplateBuilder(tokenizer).appendTools(tools);
  messages.forEach((message, index) => builder.appendMessage(message, false, `messages[${index}]`));
  return builder.appendGenerationPrompt().tokens;
}
