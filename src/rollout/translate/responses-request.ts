/**
 * A Responses API request (`POST …/responses`) as one chat-completions request: `instructions`
 * become the system message; `input` (a string, or messages, `function_call`,
 * `function_call_output`, `reasoning` and `item_reference` items) becomes the messages, an
 * assistant turn's text, reasoning and calls joined into one assistant message as a Choice holds
 * them; function `tools`, `tool_choice`, `parallel_tool_calls`, `max_output_tokens`,
 * `temperature`, `top_p`, `top_logprobs`, `user` and `text.format` map to their chat-completions
 * names; `previous_response_id` puts the conversation of an earlier response of the same rollout
 * in front. What chat completions cannot carry (built-in tools, `background`, `conversation`,
 * stored prompts, images and files) is refused with an error that names it.
 */
import { describeValue } from '../../internal/describe-value.js';
import type { ChatMessage, ConversationStore } from './conversation-store.js';
import { arrayAt, isObject, objectAt, optionalBooleanAt, optionalNumberAt, stringAt } from './json-values.js';
import { malformed, TranslationError, unsupported } from './translation-error.js';

/** A Responses request and the chat-completions request it became. */
export interface ResponsesRequest {
  /** The request as the caller sent it (its fields are echoed in the response). */
  readonly body: Record<string, unknown>;
  /** The chat-completions request (before the recording fetch's defaults). */
  readonly chat: Record<string, unknown>;
  /** The conversation without the `instructions` message: what a continuation carries over. */
  readonly history: ChatMessage[];
  /** Whether the caller asked for `message.output_text.logprobs`. */
  readonly includeLogprobs: boolean;
  /** Whether the caller asked for a stream of events. */
  readonly stream: boolean;
}

/** Built-in tools of the Responses API, by their `type`, with the feature's name. */
const BUILT_IN_TOOLS: Readonly<Record<string, string>> = {
  web_search: 'web search',
  web_search_preview: 'web search',
  web_search_2025_08_26: 'web search',
  web_search_preview_2025_03_11: 'web search',
  file_search: 'file search',
  computer: 'computer use',
  computer_use: 'computer use',
  computer_use_preview: 'computer use',
  code_interpreter: 'code interpreter',
  image_generation: 'image generation',
  mcp: 'remote MCP servers',
  local_shell: 'local shell',
  shell: 'shell',
  apply_patch: 'apply patch',
  tool_search: 'tool search',
};

/** Output items of built-in tools (and their outputs) that may come back in `input`. */
const BUILT_IN_ITEMS: Readonly<Record<string, string>> = {
  web_search_call: 'web search',
  file_search_call: 'file search',
  computer_call: 'computer use',
  computer_call_output: 'computer use',
  code_interpreter_call: 'code interpreter',
  image_generation_call: 'image generation',
  local_shell_call: 'local shell',
  local_shell_call_output: 'local shell',
  shell_call: 'shell',
  shell_call_output: 'shell',
  apply_patch_call: 'apply patch',
  apply_patch_call_output: 'apply patch',
  mcp_call: 'remote MCP servers',
  mcp_list_tools: 'remote MCP servers',
  mcp_approval_request: 'remote MCP servers',
  mcp_approval_response: 'remote MCP servers',
  tool_search_call: 'tool search',
  tool_search_output: 'tool search',
};

/** The refusal of a built-in tool (or its item) `type`. */
function builtInTool(type: string, param: string, kind: 'tool' | 'item'): TranslationError {
  const feature = (kind === 'tool' ? BUILT_IN_TOOLS : BUILT_IN_ITEMS)[type];
  if (feature === undefined)
    return unsupported(
      'responses',
      kind === 'tool' ? `Tools of type \`${type}\`` : `Input items of type \`${type}\``,
      param,
      'only function tools and their calls translate',
    );
  return unsupported(
    'responses',
    `The built-in ${feature} tool (\`${type}\`)`,
    param,
    'offer it as a function tool your agent runs itself',
  );
}

/** The text of a message's `content` (a string, or text parts joined as the API joins them). */
function contentText(content: unknown, param: string): string {
  if (typeof content === 'string') return content;
  const parts = arrayAt(content, param);
  let text = '';
  parts.forEach((raw, index) => {
    const part = objectAt(raw, `${param}[${index}]`);
    const type = part['type'];
    if (type === 'input_text' || type === 'output_text' || type === 'text' || type === 'summary_text') {
      text += stringAt(part['text'], `${param}[${index}].text`);
    } else if (type === 'reasoning_text') {
      text += stringAt(part['text'], `${param}[${index}].text`);
    } else if (type === 'refusal') {
      text += stringAt(part['refusal'], `${param}[${index}].refusal`);
    } else if (type === 'input_image') {
      throw unsupported('responses', 'Images (`input_image` parts)', `${param}[${index}]`);
    } else if (type === 'input_file') {
      throw unsupported('responses', 'Files (`input_file` parts)', `${param}[${index}]`);
    } else if (type === 'input_audio') {
      throw unsupported('responses', 'Audio (`input_audio` parts)', `${param}[${index}]`);
    } else {
      throw unsupported('responses', `Content parts of type ${describeValue(type)}`, `${param}[${index}].type`);
    }
  });
  return text;
}

/**
 * Builds chat messages from input items: consecutive assistant items (reasoning, text, calls) make
 * one assistant message, as the Choice they came from held them.
 */
class MessageBuilder {
  readonly messages: ChatMessage[] = [];
  /** The assistant message being built, while only assistant items follow each other. */
  #assistant: ChatMessage | undefined = undefined;

  constructor(private readonly store: ConversationStore) {}

  /** Adds one input item (already checked to be an object). */
  add(item: Record<string, unknown>, param: string, resolving = false): void {
    const type = item['type'] ?? (item['role'] === undefined ? undefined : 'message');
    switch (type) {
      case 'message':
        this.#message(item, param);
        return;
      case 'function_call':
        this.#functionCall(item, param);
        return;
      case 'function_call_output': {
        this.#assistant = undefined;
        const output = item['output'];
        this.messages.push({
          role: 'tool',
          tool_call_id: stringAt(item['call_id'], `${param}.call_id`),
          content: contentText(output, `${param}.output`),
        });
        return;
      }
      case 'reasoning':
        this.#reasoning(item, param);
        return;
      case 'item_reference': {
        const id = stringAt(item['id'], `${param}.id`);
        const referenced = this.store.item(id);
        if (referenced === undefined || resolving) {
          throw new TranslationError(
            `Item '${id}' (${param}) names no output item of this rollout: policyloop keeps the responses a ` +
              'rollout makes, in memory, for that rollout only; send the item itself in `input`',
            `${param}.id`,
          );
        }
        this.add(referenced, param, true);
        return;
      }
      case 'custom_tool_call':
      case 'custom_tool_call_output':
        throw unsupported('responses', 'Custom (free-form) tool calls', `${param}.type`, 'use function tools');
      case 'compaction':
        throw unsupported('responses', 'Compaction items', `${param}.type`);
      default:
        if (typeof type === 'string') throw builtInTool(type, `${param}.type`, 'item');
        throw malformed(`${param}.type`, 'an input item type (message, function_call, ...)', describeValue(type));
    }
  }

  #message(item: Record<string, unknown>, param: string): void {
    const role = item['role'];
    const text = contentText(item['content'], `${param}.content`);
    if (role === 'assistant') {
      const open = this.#assistant;
      if (open !== undefined && (open['content'] ?? null) === null && open['tool_calls'] === undefined) {
        open['content'] = text;
      } else {
        this.#assistant = { role: 'assistant', content: text };
        this.messages.push(this.#assistant);
      }
      return;
    }
    if (role !== 'user' && role !== 'system' && role !== 'developer') {
      throw malformed(`${param}.role`, "'user', 'assistant', 'system' or 'developer'", describeValue(role));
    }
    this.#assistant = undefined;
    // Chat templates know `system`; `developer` is the Responses API's name for the same turn.
    this.messages.push({ role: role === 'developer' ? 'system' : role, content: text });
  }

  #functionCall(item: Record<string, unknown>, param: string): void {
    const call = {
      id: stringAt(item['call_id'], `${param}.call_id`),
      type: 'function',
      function: {
        name: stringAt(item['name'], `${param}.name`),
        arguments: stringAt(item['arguments'], `${param}.arguments`),
      },
    };
    const open = this.#openAssistant();
    const calls = (open['tool_calls'] as unknown[] | undefined) ?? [];
    calls.push(call);
    open['tool_calls'] = calls;
  }

  #reasoning(item: Record<string, unknown>, param: string): void {
    let text = '';
    if (Array.isArray(item['content']) && item['content'].length > 0)
      text = contentText(item['content'], `${param}.content`);
    else if (Array.isArray(item['summary'])) text = contentText(item['summary'], `${param}.summary`);
    if (text === '') return; // encrypted reasoning only: nothing the model can be shown
    const open = this.#assistant;
    if (open !== undefined && (open['content'] ?? null) === null && open['tool_calls'] === undefined) {
      open['reasoning_content'] = ((open['reasoning_content'] as string | undefined) ?? '') + text;
      return;
    }
    this.#assistant = { role: 'assistant', content: null, reasoning_content: text };
    this.messages.push(this.#assistant);
  }

  /** The assistant message calls join: the open one, or a new one. */
  #openAssistant(): ChatMessage {
    if (this.#assistant === undefined) {
      this.#assistant = { role: 'assistant', content: null };
      this.messages.push(this.#assistant);
    }
    return this.#assistant;
  }
}

/** A function tool of the Responses API as a chat-completions tool. */
function chatTool(raw: unknown, param: string): Record<string, unknown> {
  const tool = objectAt(raw, param);
  const type = tool['type'];
  if (type === 'custom')
    throw unsupported('responses', 'Custom (free-form) tools', `${param}.type`, 'use function tools');
  if (type !== 'function') {
    if (typeof type === 'string') throw builtInTool(type, `${param}.type`, 'tool');
    throw malformed(`${param}.type`, "'function'", describeValue(type));
  }
  const fn: Record<string, unknown> = { name: stringAt(tool['name'], `${param}.name`) };
  if (typeof tool['description'] === 'string') fn['description'] = tool['description'];
  if (isObject(tool['parameters'])) fn['parameters'] = tool['parameters'];
  if (typeof tool['strict'] === 'boolean') fn['strict'] = tool['strict'];
  return { type: 'function', function: fn };
}

/** `tool_choice` of the Responses API in chat-completions form. */
function chatToolChoice(choice: unknown): unknown {
  if (choice === 'auto' || choice === 'none' || choice === 'required') return choice;
  const object = objectAt(choice, 'tool_choice');
  const type = object['type'];
  if (type === 'function')
    return { type: 'function', function: { name: stringAt(object['name'], 'tool_choice.name') } };
  if (type === 'allowed_tools') throw unsupported('responses', '`tool_choice` of type `allowed_tools`', 'tool_choice');
  if (typeof type === 'string' && type !== '') throw builtInTool(type, 'tool_choice.type', 'tool');
  throw malformed('tool_choice', "'auto', 'none', 'required' or a function tool choice", describeValue(choice));
}

/** `text.format` as a chat-completions `response_format`, or undefined for plain text. */
function responseFormat(text: unknown): Record<string, unknown> | undefined {
  if (text === undefined || text === null) return undefined;
  const format = objectAt(text, 'text')['format'];
  if (format === undefined || format === null) return undefined;
  const object = objectAt(format, 'text.format');
  switch (object['type']) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'json_object' };
    case 'json_schema': {
      const schema: Record<string, unknown> = {
        name: stringAt(object['name'], 'text.format.name'),
        schema: objectAt(object['schema'], 'text.format.schema'),
      };
      if (typeof object['strict'] === 'boolean') schema['strict'] = object['strict'];
      if (typeof object['description'] === 'string') schema['description'] = object['description'];
      return { type: 'json_schema', json_schema: schema };
    }
    default:
      throw malformed('text.format.type', "'text', 'json_object' or 'json_schema'", describeValue(object['type']));
  }
}

/**
 * Translates a parsed Responses request body. `store` resolves `previous_response_id` and
 * `item_reference` (the rollout's responses).
 * @throws {TranslationError} for a malformed body, an unknown `previous_response_id` or item, and
 * a feature chat completions cannot carry.
 */
export function translateResponsesRequest(raw: unknown, store: ConversationStore): ResponsesRequest {
  const body = objectAt(raw, 'body');
  if (body['background'] === true)
    throw unsupported('responses', 'Background responses (`background: true`)', 'background', 'leave it unset');
  if (body['conversation'] !== undefined && body['conversation'] !== null)
    throw unsupported(
      'responses',
      'Conversation objects (`conversation`)',
      'conversation',
      'send the conversation in `input`, or continue it with `previous_response_id`',
    );
  if (body['prompt'] !== undefined && body['prompt'] !== null)
    throw unsupported('responses', 'Stored prompt templates (`prompt`)', 'prompt', 'send `instructions` and `input`');

  const history: ChatMessage[] = [];
  const previousId = body['previous_response_id'];
  if (previousId !== undefined && previousId !== null) {
    const id = stringAt(previousId, 'previous_response_id');
    const previous = store.response(id);
    if (previous === undefined) {
      throw new TranslationError(
        `Previous response with id '${id}' not found: policyloop keeps the responses a rollout makes, in memory, ` +
          'for that rollout only, so `previous_response_id` must name a response made earlier in the same rollout',
        'previous_response_id',
      );
    }
    history.push(...previous.history);
  }
  const input = body['input'];
  if (typeof input === 'string') history.push({ role: 'user', content: input });
  else if (input !== undefined && input !== null) {
    const builder = new MessageBuilder(store);
    arrayAt(input, 'input').forEach((item, index) => builder.add(objectAt(item, `input[${index}]`), `input[${index}]`));
    history.push(...builder.messages);
  }
  const messages: ChatMessage[] = [];
  const instructions = body['instructions'];
  if (instructions !== undefined && instructions !== null && instructions !== '')
    messages.push({ role: 'system', content: stringAt(instructions, 'instructions') });
  messages.push(...history);
  if (messages.length === 0)
    throw malformed('input', 'a string or a non-empty array of input items', describeValue(input));

  const chat: Record<string, unknown> = { messages };
  if (body['model'] !== undefined && body['model'] !== null) chat['model'] = stringAt(body['model'], 'model');
  const tools = body['tools'];
  if (tools !== undefined && tools !== null) {
    const list = arrayAt(tools, 'tools').map((tool, index) => chatTool(tool, `tools[${index}]`));
    if (list.length > 0) chat['tools'] = list;
  }
  if (body['tool_choice'] !== undefined && body['tool_choice'] !== null)
    chat['tool_choice'] = chatToolChoice(body['tool_choice']);
  const parallel = optionalBooleanAt(body['parallel_tool_calls'], 'parallel_tool_calls');
  if (parallel !== undefined && chat['tools'] !== undefined) chat['parallel_tool_calls'] = parallel;
  const maxTokens = optionalNumberAt(body['max_output_tokens'], 'max_output_tokens');
  if (maxTokens !== undefined) chat['max_tokens'] = maxTokens;
  const temperature = optionalNumberAt(body['temperature'], 'temperature');
  if (temperature !== undefined) chat['temperature'] = temperature;
  const topP = optionalNumberAt(body['top_p'], 'top_p');
  if (topP !== undefined) chat['top_p'] = topP;
  const topLogprobs = optionalNumberAt(body['top_logprobs'], 'top_logprobs');
  if (topLogprobs !== undefined) {
    chat['logprobs'] = true;
    chat['top_logprobs'] = topLogprobs;
  }
  const user = body['user'] ?? body['safety_identifier'];
  if (typeof user === 'string') chat['user'] = user;
  const format = responseFormat(body['text']);
  if (format !== undefined) chat['response_format'] = format;
  const stream = optionalBooleanAt(body['stream'], 'stream') === true;
  if (stream) {
    chat['stream'] = true;
    chat['stream_options'] = { include_usage: true };
  }
  const include = body['include'];
  const includeLogprobs = Array.isArray(include) && include.includes('message.output_text.logprobs');
  return { body, chat, history, includeLogprobs, stream };
}
