/** An MCP `tools/call` result as the tool message the model reads. */
import type { ToolResult } from '../tool-types.js';

/** One content block of a tool result (text, image, audio, an embedded resource, a resource link). */
export interface McpContentBlock {
  readonly type: string;
  readonly text?: string | undefined;
  readonly mimeType?: string | undefined;
  readonly uri?: string | undefined;
  readonly name?: string | undefined;
  readonly resource?:
    | { readonly uri?: string | undefined; readonly text?: string | undefined; readonly mimeType?: string | undefined }
    | undefined;
}

/** What `tools/call` answers (the current shape, or a legacy `toolResult`). */
export interface McpCallResult {
  readonly content?: readonly McpContentBlock[] | undefined;
  readonly structuredContent?: unknown;
  readonly isError?: boolean | undefined;
  readonly toolResult?: unknown;
}

/** One block as text: text as it is, a resource's text, a note for what a chat model cannot read. */
function blockText(block: McpContentBlock): string {
  switch (block.type) {
    case 'text':
      return block.text ?? '';
    case 'resource': {
      const resource = block.resource ?? {};
      if (typeof resource.text === 'string') return resource.text;
      return `[resource ${resource.uri ?? ''}${resource.mimeType === undefined ? '' : ` (${resource.mimeType})`}]`;
    }
    case 'resource_link':
      return `[resource link ${block.name ?? ''} ${block.uri ?? ''}]`.replace(/\s+/g, ' ');
    default:
      return `[${block.type}${block.mimeType === undefined ? '' : ` (${block.mimeType})`}]`;
  }
}

/** The text of a result: its content blocks joined by newlines, else its structured content as JSON. */
export function resultText(result: McpCallResult): string {
  const blocks = result.content ?? [];
  if (blocks.length > 0) return blocks.map(blockText).join('\n');
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  if (result.toolResult !== undefined) return JSON.stringify(result.toolResult);
  return '';
}

/**
 * The tool message of a result: its text, an error when the server says so (`isError`), and an
 * error in its place when it is longer than `maxResultChars` (as OpenPipe ART does: a result that
 * large would crowd out the conversation).
 */
export function toToolResult(tool: string, result: McpCallResult, maxResultChars: number): ToolResult {
  const text = resultText(result);
  if (text.length > maxResultChars) {
    return {
      content: `Error: the result of \`${tool}\` is ${text.length} characters long, over the limit of ${maxResultChars}.`,
      isError: true,
    };
  }
  if (result.isError === true) return { content: text.startsWith('Error') ? text : `Error: ${text}`, isError: true };
  return { content: text, isError: false };
}
