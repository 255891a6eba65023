/** The token ids a model samples after: the conversation so far rendered with the generation prompt. */
import type { TextLayer } from './text-layer.js';

type ChatMessages = Parameters<TextLayer['renderChat']>[0];
type Tools = Parameters<TextLayer['renderChat']>[1]['tools'];

/**
 * Token ids of a rendered prompt (the conversation so far plus the generation prompt), with a
 * request's `chat_template_kwargs` as extra template variables (`{ enable_thinking: false }`).
 * @example
 * const ids = promptTokens(text, [{ role: 'user', content: 'Hi' }], undefined, { enable_thinking: false });
 */
export function promptTokens(
  text: TextLayer,
  messages: readonly unknown[],
  tools: readonly unknown[] | null | undefined,
  templateVariables?: Readonly<Record<string, unknown>> | null | undefined,
): number[] {
  return text.encode(
    text.renderChat(messages as ChatMessages, {
      tools: (tools ?? undefined) as Tools,
      addGenerationPrompt: true,
      templateVariables: templateVariables ?? undefined,
    }),
  );
}
