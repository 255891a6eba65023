/**
 * Rendering a conversation with a model's own Jinja chat template, as transformers'
 * `apply_chat_template` does: the same template variables, and OpenAI-shaped messages turned into
 * the shape Hugging Face templates read (see {@link templateMessages}).
 */
import type { Template } from '@huggingface/jinja';
import type { ChatCompletionMessageParam, ChatCompletionToolParam } from '../schema/index.js';
import { EngineInputError } from './input-error.js';

type Json = Record<string, unknown>;

function textOf(content: unknown, where: string): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part: unknown, index) => {
        const record = (part ?? {}) as Json;
        if (record['type'] === 'text' && typeof record['text'] === 'string') return record['text'];
        if (record['type'] === 'refusal' && typeof record['refusal'] === 'string') return record['refusal'];
        throw new EngineInputError(
          `The engine reads text only: expected a text content part at ${where}.content[${index}], got type ${JSON.stringify(record['type'])}.`,
          ['body', 'messages'],
        );
      })
      .join('');
  }
  throw new EngineInputError(
    `Expected ${where}.content to be a string or an array of text parts, got ${typeof content}.`,
    ['body', 'messages'],
  );
}

/** A JSON-string `arguments` as the object it encodes (kept as the string when it is not a JSON object). */
function argumentsValue(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value;
  } catch {
    // Not JSON: the template gets the string as it came.
  }
  return text;
}

function templateToolCall(raw: unknown, index: number, where: string): Json {
  const call = (raw ?? {}) as Json;
  if (call['type'] === 'custom') {
    const custom = (call['custom'] ?? {}) as Json;
    return {
      id: call['id'],
      type: 'function',
      function: { name: String(custom['name'] ?? ''), arguments: { input: String(custom['input'] ?? '') } },
    };
  }
  const fn = call['function'] as Json | undefined;
  if (!fn || typeof fn['name'] !== 'string')
    throw new EngineInputError(
      `Expected ${where}.tool_calls[${index}] to be {id, type: "function", function: {name, arguments}}, got ${JSON.stringify(raw)}.`,
      ['body', 'messages'],
    );
  return {
    id: call['id'],
    type: 'function',
    function: { name: fn['name'], arguments: argumentsValue(String(fn['arguments'] ?? '')) },
  };
}

const REASONING_FIELDS = ['reasoning_content', 'thinking', 'reasoning'] as const;

/**
 * OpenAI-shaped messages in the shape Hugging Face chat templates read:
 * - keys whose value is null are dropped (transformers does the same before rendering);
 * - text content parts are joined into one string (other parts are refused: the engine is text only);
 * - `developer` messages become `system` messages, legacy `function` messages become `tool`
 *   messages, and a legacy `function_call` becomes the one tool call;
 * - a tool call's JSON-string `arguments` becomes the object it encodes (templates print it with
 *   `tojson`); a custom tool call becomes a function call with arguments `{input}`;
 * - an assistant message without content gets `""` (templates concatenate it);
 * - reasoning under `reasoning_content`, `thinking` or `reasoning` (the first set, in that order)
 *   becomes `reasoning_content`, and `thinking` when the message has none, as transformers does.
 */
export function templateMessages(messages: readonly ChatCompletionMessageParam[]): Json[] {
  return messages.map((message, index) => {
    const where = `messages[${index}]`;
    const out: Json = {};
    for (const [key, value] of Object.entries(message)) if (value !== null && value !== undefined) out[key] = value;
    const role = message.role;
    if (role === 'developer') out['role'] = 'system';
    if (role === 'function') out['role'] = 'tool';
    if (role === 'assistant') {
      const calls: Json[] = Array.isArray(message.tool_calls)
        ? message.tool_calls.map((call, callIndex) => templateToolCall(call, callIndex, where))
        : [];
      if (message.function_call)
        calls.push({
          id: 'call_0',
          type: 'function',
          function: {
            name: message.function_call.name,
            arguments: argumentsValue(message.function_call.arguments),
          },
        });
      delete out['function_call'];
      if (calls.length > 0) out['tool_calls'] = calls;
      else delete out['tool_calls'];
      out['content'] = message.content === null || message.content === undefined ? '' : textOf(message.content, where);
    } else if (out['content'] !== undefined) {
      out['content'] = textOf(out['content'], where);
    }
    const reasoning = REASONING_FIELDS.map((key) => out[key]).find((value) => value !== undefined);
    if (reasoning !== undefined) {
      // transformers: {"thinking": reasoning, **message, "reasoning_content": reasoning}.
      if (out['thinking'] === undefined) out['thinking'] = reasoning;
      out['reasoning_content'] = reasoning;
    }
    return out;
  });
}

/**
 * Tools as the template gets them: function tools as they are (the OpenAI shape is the one Hugging
 * Face templates expect), a custom tool as a function taking `{input: string}`; none when empty.
 */
export function templateTools(tools: readonly ChatCompletionToolParam[] | undefined): Json[] | null {
  if (!tools || tools.length === 0) return null;
  return tools.map((tool) => {
    if (tool.type === 'custom') {
      const definition: Json = { name: tool.custom.name };
      if (tool.custom.description !== undefined) definition['description'] = tool.custom.description;
      definition['parameters'] = {
        type: 'object',
        properties: { input: { type: 'string' } },
        required: ['input'],
      };
      return { type: 'function', function: definition };
    }
    return tool as Json;
  });
}

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = [
  'January',
  'February',
  'March',
  'April',
  'May',
  'June',
  'July',
  'August',
  'September',
  'October',
  'November',
  'December',
];

/**
 * Python's `datetime.strftime` for the directives chat templates use (English names, local time,
 * glibc's `%-d` without padding); other directives are left as written.
 */
export function strftime(date: Date, format: string): string {
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0');
  return format.replace(/%(-?)([a-zA-Z%])/g, (whole, noPadding: string, directive: string) => {
    const value = directive === '%' ? '%' : field(directive);
    if (value === null) return whole;
    // `%-d` (glibc): the number without its leading zeros.
    return noPadding ? value.replace(/^0+(?=\d)/, '') : value;
  });

  function field(directive: string): string | null {
    switch (directive) {
      case 'd':
        return pad(date.getDate());
      case 'm':
        return pad(date.getMonth() + 1);
      case 'Y':
        return String(date.getFullYear());
      case 'y':
        return pad(date.getFullYear() % 100);
      case 'b':
        return (MONTHS[date.getMonth()] ?? '').slice(0, 3);
      case 'B':
        return MONTHS[date.getMonth()] ?? '';
      case 'a':
        return (DAYS[date.getDay()] ?? '').slice(0, 3);
      case 'A':
        return DAYS[date.getDay()] ?? '';
      case 'H':
        return pad(date.getHours());
      case 'I':
        return pad(((date.getHours() + 11) % 12) + 1);
      case 'p':
        return date.getHours() < 12 ? 'AM' : 'PM';
      case 'M':
        return pad(date.getMinutes());
      case 'S':
        return pad(date.getSeconds());
      case 'j': {
        const start = new Date(date.getFullYear(), 0, 1);
        return pad(Math.floor((date.getTime() - start.getTime()) / 86_400_000) + 1, 3);
      }
      default:
        return null;
    }
  }
}

/** A compiled chat template and what it needs to render. */
export interface ChatTemplate {
  /** Where the template came from (for error messages). */
  readonly source: string;
  /** The template text. */
  readonly text: string;
  /** True when the template reads the `tools` variable at all. */
  readonly readsTools: boolean;
  /** Renders with the template variables of `apply_chat_template`. */
  render(variables: Readonly<Record<string, unknown>>): string;
}

class TemplateRaised extends Error {}

/** Python's `range`, a global of Jinja. */
function range(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range() arg 3 must not be zero');
  const values: number[] = [];
  for (let value = from; step > 0 ? value < to : value > to; value += step) values.push(value);
  return values;
}

/** The `@huggingface/jinja` module (imported when a text layer loads: it is an optional dependency). */
export type JinjaModule = typeof import('@huggingface/jinja');

/** Compiles a chat template with `jinja`; `source` names its file in errors. */
export function compileChatTemplate(jinja: JinjaModule, text: string, source: string): ChatTemplate {
  const { Environment, Interpreter } = jinja;
  let template: Template;
  try {
    template = new jinja.Template(text);
  } catch (error) {
    throw new Error(
      `Expected a Jinja chat template in ${source}, got one @huggingface/jinja cannot parse: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return {
    source,
    text,
    readsTools: /\btools\b/.test(text),
    render(variables) {
      try {
        // Template.render refuses to redeclare its globals, and ours differ: raise_exception must be
        // told from other failures, strftime_now must take the layer's clock and English names.
        // So the environment is set up here, with the globals of @huggingface/jinja's setupGlobals.
        const environment = new Environment();
        const globals: Record<string, unknown> = {
          false: false,
          true: true,
          none: null,
          False: false,
          True: true,
          None: null,
          range,
          ...variables,
          raise_exception: (message: unknown) => {
            throw new TemplateRaised(String(message));
          },
        };
        for (const [name, value] of Object.entries(globals)) environment.set(name, value);
        const result = new Interpreter(environment).run(template.parsed);
        return String(result.value);
      } catch (error) {
        if (error instanceof TemplateRaised)
          throw new EngineInputError(`The chat template of ${source} refused the conversation: ${error.message}`, [
            'body',
            'messages',
          ]);
        throw new EngineInputError(
          `The chat template of ${source} failed on this conversation: ${error instanceof Error ? error.message : String(error)}`,
          ['body', 'messages'],
        );
      }
    },
  };
}
