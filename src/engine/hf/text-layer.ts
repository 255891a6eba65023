/**
 * The text layer of a Hugging Face model folder: its own tokenizer (`tokenizer.json`, through
 * `@huggingface/tokenizers`), its own chat template (`chat_template.jinja` or
 * `tokenizer_config.json`'s `chat_template`, through `@huggingface/jinja`), its stop tokens
 * (`generation_config.json` and the tokenizer's eos) and the parser of the tool calls its family
 * writes. See docs/engine.md, "Tokenizer, chat template and tool calls of real models".
 */
import type {
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionToolParam,
} from '../../schema/index.js';

/** A chat message as the OpenAI chat-completions API carries it. */
export type ChatMessage = ChatCompletionMessageParam;
/** A tool offered to the model, as the OpenAI chat-completions API carries it. */
export type Tool = ChatCompletionToolParam;
/** A tool call in OpenAI's shape (`{id, type: 'function', function: {name, arguments}}`). */
export type ToolCall = ChatCompletionMessageToolCall;

/** How the model family writes tool calls (decides what {@link TextLayer.parseAssistant} looks for). */
export type ToolCallFormat = 'hermes' | 'llama3-json';

/** Options of {@link TextLayer.renderChat} and {@link TextLayer.encodeChat}. */
export interface ChatRenderOptions {
  /** Tools offered to the model (none when absent or empty: the template gets `tools = none`). */
  readonly tools?: readonly Tool[] | undefined;
  /** Append the opening of an assistant turn (what the model continues from). */
  readonly addGenerationPrompt: boolean;
  /**
   * Extra template variables, like `apply_chat_template(**kwargs)` (vLLM's `chat_template_kwargs`),
   * e.g. `{ enable_thinking: false }` for Qwen3. They override the special-token variables.
   */
  readonly templateVariables?: Readonly<Record<string, unknown>> | undefined;
}

/** Options of {@link TextLayer.parseAssistant}. */
export interface ParseAssistantOptions {
  /**
   * Makes the id of the call at `index` (0-based in the completion). By default the id is
   * `call_` + 24 hex characters of a SHA-256 of the completion text and the index: the same text
   * always gets the same ids.
   */
  readonly makeId?: ((index: number) => string) | undefined;
  /** The request's tools: a call to a custom tool among them becomes a custom tool call. */
  readonly tools?: readonly Tool[] | null | undefined;
}

/** What {@link TextLayer.parseAssistant} found in a completion. */
export interface ParsedAssistant {
  /** Text outside tool calls and reasoning (trimmed), or null when nothing is left. */
  content: string | null;
  /** The tool calls, absent when there are none (or one was malformed: then all is content). */
  tool_calls?: ToolCall[];
  /** Qwen3's `<think>` text, absent when the completion has none (or it is empty). */
  reasoning?: string;
}

/** Options of {@link TextLayer.decode}. */
export interface DecodeOptions {
  /** Leave out the tokens the tokenizer marks special (`<|im_end|>`, `<|eot_id|>`, ...). @default false */
  readonly skipSpecialTokens?: boolean | undefined;
}

/** The tokenizer, chat template, stop tokens and tool-call parser of one model folder. */
export interface TextLayer {
  /** The tokenizer's full size including added tokens (highest id + 1). */
  readonly vocabularySize: number;
  /** End-of-turn ids: `generation_config.json`'s `eos_token_id`(s), then the tokenizer's eos. */
  readonly stopTokenIds: readonly number[];
  /** Id of the tokenizer's `bos_token`, or null when it has none (Qwen3). */
  readonly bosTokenId: number | null;
  /** How this family writes tool calls. */
  readonly toolCallFormat: ToolCallFormat;
  /** Token ids of text; special tokens written in the text are encoded as such, nothing is added. */
  encode(text: string): number[];
  /** Text of token ids; skips nothing unless asked. Ids beyond the vocabulary decode to nothing. */
  decode(ids: readonly number[], options?: DecodeOptions): string;
  /** The UTF-8 bytes of one token (its piece of text; a partial character is a partial sequence). */
  tokenBytes(id: number): number[];
  /** The prompt text the model's own chat template renders for `messages`. */
  renderChat(messages: readonly ChatMessage[], options: ChatRenderOptions): string;
  /** Splits a completion into content, tool calls and reasoning, the way this family writes them. */
  parseAssistant(text: string, options?: ParseAssistantOptions): ParsedAssistant;
  /** Render + encode in one call; what the engine feeds the model. */
  encodeChat(messages: readonly ChatMessage[], options: ChatRenderOptions): number[];
}

/** Options of {@link loadTextLayer}. */
export interface TextLayerOptions {
  /** The clock of the template's `strftime_now` (Llama 3.2's "Today Date"). @default () => new Date() */
  readonly now?: (() => Date) | undefined;
}

/**
 * Loads the text layer of a Hugging Face model folder (`tokenizer.json`, `tokenizer_config.json`,
 * optional `chat_template.jinja` and `generation_config.json`).
 *
 * @example
 * const text = await loadTextLayer('/models/Qwen3-0.6B');
 * const ids = text.encodeChat([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true });
 */
export async function loadTextLayer(dir: string, options: TextLayerOptions = {}): Promise<TextLayer> {
  // The implementation lands in the next commit; the interface is published first for its users.
  throw new Error(
    `loadTextLayer(${JSON.stringify(dir)}, ${JSON.stringify(Object.keys(options))}) is not implemented yet.`,
  );
}
