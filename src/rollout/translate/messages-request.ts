/**
 * An Anthropic Messages API request (`POST …/v1/messages`) as one chat-completions request:
 * `system` (a string or text blocks) becomes the system message; each message's `text`,
 * `tool_use` and `thinking` blocks become a user or assistant message (with `tool_calls` and
 * `reasoning_content`), each `tool_result` block a tool message (an `is_error` result says so in
 * its text); `tools` with `input_schema` become function tools; `tool_choice` (`auto`, `any`,
 * `tool`, `none`, `disable_parallel_tool_use`), `max_tokens`, `stop_sequences`, `temperature`,
 * `top_p`, `top_k`, `metadata.user_id` and `output_config.format` (a JSON schema) map to their
 * chat-completions names. Images, documents,
 * citations, server tools and MCP servers are refused with an error that names them.
 */
import { describeValue } from '../../internal/describe-value.js';
import { canonicalJson } from './canonical-json.js';
import type { ChatMessage, ConversationStore } from './conversation-store.js';
import { arrayAt, isObject, objectAt, optionalBooleanAt, optionalNumberAt, stringAt } from './json-values.js';
import { malformed, type TranslationError, unsupported } from './translation-error.js';

/** A Messages request and the chat-completions request it became. */
export interface MessagesRequest {
  /** The request as the caller sent it. */
  readonly body: Record<string, unknown>;
  /** The chat-completions request (before the recording fetch's defaults). */
  readonly chat: Record<string, unknown>;
  /** The stop sequences asked for (to tell `stop_sequence` from `end_turn`). */
  readonly stopSequences: readonly string[];
  /** Whether the caller asked for a stream of events. */
  readonly stream: boolean;
}

/** A block type the translation refuses, with its name in the message. */
function refusedBlock(type: unknown, param: string): TranslationError {
  switch (type) {
    case 'image':
      return unsupported('messages', 'Images (`image` blocks)', param);
    case 'document':
      return unsupported('messages', 'Documents (`document` blocks)', param);
    case 'search_result':
      return unsupported('messages', 'Search results (`search_result` blocks)', param);
    case 'container_upload':
      return unsupported('messages', 'Container uploads (`container_upload` blocks)', param);
    default:
      if (
        typeof type === 'string' &&
        (type.startsWith('server_tool_use') || type.endsWith('_tool_result') || type.startsWith('mcp_'))
      )
        return unsupported(
          'messages',
          `Server tools (\`${type}\` blocks)`,
          param,
          'offer them as client tools your agent runs itself',
        );
      return unsupported('messages', `Content blocks of type ${describeValue(type)}`, param);
  }
}

/** The text of a `text` block; citations are refused. */
function textOfBlock(block: Record<string, unknown>, param: string): string {
  const citations = block['citations'];
  if (Array.isArray(citations) ? citations.length > 0 : citations !== undefined && citations !== null)
    throw unsupported('messages', 'Citations (`citations` on text blocks)', `${param}.citations`);
  return stringAt(block['text'], `${param}.text`);
}

/** The text of a tool result's `content` (a string or text blocks). */
function toolResultText(content: unknown, param: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  return arrayAt(content, param)
    .map((raw, index) => {
      const block = objectAt(raw, `${param}[${index}]`);
      if (block['type'] !== 'text') throw refusedBlock(block['type'], `${param}[${index}].type`);
      return textOfBlock(block, `${param}[${index}]`);
    })
    .join('\n');
}

/** The messages one Messages API message becomes. */
function chatMessages(raw: unknown, param: string, store: ConversationStore): ChatMessage[] {
  const message = objectAt(raw, param);
  const role = message['role'];
  if (role !== 'user' && role !== 'assistant')
    throw malformed(`${param}.role`, "'user' or 'assistant'", describeValue(role));
  const content = message['content'];
  if (typeof content === 'string') return [{ role, content }];
  const blocks = arrayAt(content, `${param}.content`);
  if (role === 'user') {
    const tools: ChatMessage[] = [];
    const texts: string[] = [];
    blocks.forEach((rawBlock, index) => {
      const where = `${param}.content[${index}]`;
      const block = objectAt(rawBlock, where);
      if (block['type'] === 'text') texts.push(textOfBlock(block, where));
      else if (block['type'] === 'tool_result') {
        const text = toolResultText(block['content'], `${where}.content`);
        const isError = optionalBooleanAt(block['is_error'], `${where}.is_error`) === true;
        tools.push({
          role: 'tool',
          tool_call_id: stringAt(block['tool_use_id'], `${where}.tool_use_id`),
          content: isError ? `Error: ${text}` : text,
        });
      } else throw refusedBlock(block['type'], `${where}.type`);
    });
    // Chat completions need the tool results right after the calls; the user's text follows.
    return texts.length > 0 ? [...tools, { role: 'user', content: texts.join('\n') }] : tools;
  }
  let text: string | null = null;
  let reasoning = '';
  const calls: unknown[] = [];
  blocks.forEach((rawBlock, index) => {
    const where = `${param}.content[${index}]`;
    const block = objectAt(rawBlock, where);
    switch (block['type']) {
      case 'text':
        text = (text ?? '') + textOfBlock(block, where);
        break;
      case 'thinking':
        reasoning += stringAt(block['thinking'], `${where}.thinking`);
        break;
      case 'redacted_thinking':
        break; // encrypted: nothing the model can be shown
      case 'tool_use': {
        const id = stringAt(block['id'], `${where}.id`);
        const input = block['input'] ?? {};
        // A tool input we gave out goes back as the model's own arguments text (which may not even parse).
        const given = store.toolInput(id);
        const args =
          given !== undefined && canonicalJson(given.input) === canonicalJson(input)
            ? given.arguments
            : JSON.stringify(input);
        calls.push({
          id,
          type: 'function',
          function: { name: stringAt(block['name'], `${where}.name`), arguments: args },
        });
        break;
      }
      default:
        throw refusedBlock(block['type'], `${where}.type`);
    }
  });
  const assistant: ChatMessage = { role: 'assistant', content: text };
  if (calls.length > 0) assistant['tool_calls'] = calls;
  if (reasoning !== '') assistant['reasoning_content'] = reasoning;
  return [assistant];
}

/** The text of `system`: a string, or text blocks. */
function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  return arrayAt(system, 'system')
    .map((raw, index) => {
      const block = objectAt(raw, `system[${index}]`);
      if (block['type'] !== 'text') throw refusedBlock(block['type'], `system[${index}].type`);
      return textOfBlock(block, `system[${index}]`);
    })
    .join('\n');
}

/** A Messages API tool as a chat-completions function tool; server tools are refused. */
function chatTool(raw: unknown, param: string): Record<string, unknown> {
  const tool = objectAt(raw, param);
  const type = tool['type'];
  if (type !== undefined && type !== null && type !== 'custom') {
    throw unsupported(
      'messages',
      `Server tools (\`${String(type)}\`)`,
      `${param}.type`,
      'offer it as a client tool (`name`, `description`, `input_schema`) your agent runs itself',
    );
  }
  const fn: Record<string, unknown> = {
    name: stringAt(tool['name'], `${param}.name`),
    parameters: objectAt(tool['input_schema'], `${param}.input_schema`),
  };
  if (typeof tool['description'] === 'string') fn['description'] = tool['description'];
  return { type: 'function', function: fn };
}

/** `tool_choice` in chat-completions form, and whether parallel calls are off. */
function chatToolChoice(raw: unknown): { choice: unknown; parallel: boolean | undefined } {
  const choice = objectAt(raw, 'tool_choice');
  const parallel = optionalBooleanAt(choice['disable_parallel_tool_use'], 'tool_choice.disable_parallel_tool_use');
  const off = parallel === undefined ? undefined : !parallel;
  switch (choice['type']) {
    case 'auto':
      return { choice: 'auto', parallel: off };
    case 'any':
      return { choice: 'required', parallel: off };
    case 'none':
      return { choice: 'none', parallel: off };
    case 'tool':
      return {
        choice: { type: 'function', function: { name: stringAt(choice['name'], 'tool_choice.name') } },
        parallel: off,
      };
    default:
      throw malformed('tool_choice.type', "'auto', 'any', 'tool' or 'none'", describeValue(choice['type']));
  }
}

/**
 * Translates a parsed Messages request body. `store` gives back the arguments text of the tool
 * calls this rollout handed out.
 * @throws {TranslationError} for a malformed body and for what chat completions cannot carry.
 */
export function translateMessagesRequest(raw: unknown, store: ConversationStore): MessagesRequest {
  const body = objectAt(raw, 'body');
  if (Array.isArray(body['mcp_servers']) && body['mcp_servers'].length > 0)
    throw unsupported('messages', 'MCP servers (`mcp_servers`)', 'mcp_servers');
  if (body['container'] !== undefined && body['container'] !== null)
    throw unsupported('messages', 'Containers (`container`)', 'container');
  const messages: ChatMessage[] = [];
  if (body['system'] !== undefined && body['system'] !== null) {
    const system = systemText(body['system']);
    if (system !== '') messages.push({ role: 'system', content: system });
  }
  const list = arrayAt(body['messages'], 'messages');
  if (list.length === 0) throw malformed('messages', 'a non-empty array of messages', '[]');
  list.forEach((message, index) => messages.push(...chatMessages(message, `messages[${index}]`, store)));
  const last = list[list.length - 1];
  if (isObject(last) && last['role'] === 'assistant')
    throw unsupported(
      'messages',
      'A prefilled assistant turn (the last message is the assistant’s)',
      `messages[${list.length - 1}].role`,
      'end the messages with a user turn',
    );

  const chat: Record<string, unknown> = { messages };
  if (body['model'] !== undefined && body['model'] !== null) chat['model'] = stringAt(body['model'], 'model');
  const maxTokens = optionalNumberAt(body['max_tokens'], 'max_tokens');
  if (maxTokens === undefined)
    throw malformed('max_tokens', 'a number (the Messages API requires it)', describeValue(body['max_tokens']));
  chat['max_tokens'] = maxTokens;
  const tools = body['tools'];
  if (tools !== undefined && tools !== null) {
    const chatTools = arrayAt(tools, 'tools').map((tool, index) => chatTool(tool, `tools[${index}]`));
    if (chatTools.length > 0) chat['tools'] = chatTools;
  }
  if (body['tool_choice'] !== undefined && body['tool_choice'] !== null) {
    const { choice, parallel } = chatToolChoice(body['tool_choice']);
    chat['tool_choice'] = choice;
    if (parallel !== undefined && chat['tools'] !== undefined) chat['parallel_tool_calls'] = parallel;
  }
  let stopSequences: string[] = [];
  if (body['stop_sequences'] !== undefined && body['stop_sequences'] !== null) {
    stopSequences = arrayAt(body['stop_sequences'], 'stop_sequences').map((stop, index) =>
      stringAt(stop, `stop_sequences[${index}]`),
    );
    if (stopSequences.length > 0) chat['stop'] = stopSequences;
  }
  const temperature = optionalNumberAt(body['temperature'], 'temperature');
  if (temperature !== undefined) chat['temperature'] = temperature;
  const topP = optionalNumberAt(body['top_p'], 'top_p');
  if (topP !== undefined) chat['top_p'] = topP;
  const topK = optionalNumberAt(body['top_k'], 'top_k');
  if (topK !== undefined) chat['top_k'] = topK;
  if (body['metadata'] !== undefined && body['metadata'] !== null) {
    const userId = objectAt(body['metadata'], 'metadata')['user_id'];
    if (typeof userId === 'string') chat['user'] = userId;
  }
  if (body['output_config'] !== undefined && body['output_config'] !== null) {
    const format = objectAt(body['output_config'], 'output_config')['format'];
    if (format !== undefined && format !== null) {
      const schema = objectAt(format, 'output_config.format');
      if (schema['type'] !== 'json_schema')
        throw malformed('output_config.format.type', "'json_schema'", describeValue(schema['type']));
      chat['response_format'] = {
        type: 'json_schema',
        json_schema: { name: 'output', schema: objectAt(schema['schema'], 'output_config.format.schema') },
      };
    }
  }
  const stream = optionalBooleanAt(body['stream'], 'stream') === true;
  if (stream) {
    chat['stream'] = true;
    chat['stream_options'] = { include_usage: true };
  }
  return { body, chat, stopSequences, stream };
}
