/**
 * The text layer of a Hugging Face model folder: its own tokenizer (`tokenizer.json`, through
 * `@huggingface/tokenizers`), its own chat template (`chat_template.jinja` or
 * `tokenizer_config.json`'s `chat_template`, through `@huggingface/jinja`), its stop tokens
 * (`generation_config.json` and the tokenizer's eos) and the parser of the tool calls its family
 * writes. See docs/engine.md, "Tokenizer, chat template and tool calls of real models".
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type {
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionToolParam,
} from '../schema/index.js';
import { EngineInputError } from './input-error.js';
import { parseAssistantText } from './assistant-parser.js';
import type { ToolCallFormat } from './assistant-parser.js';
import { compileChatTemplate, strftime, templateMessages, templateTools } from './chat-render.js';
import type { ChatTemplate, JinjaModule } from './chat-render.js';

export type { ToolCallFormat } from './assistant-parser.js';

/** A chat message as the OpenAI chat-completions API carries it. */
export type ChatMessage = ChatCompletionMessageParam;
/** A tool offered to the model, as the OpenAI chat-completions API carries it. */
export type Tool = ChatCompletionToolParam;
/** A tool call in OpenAI's shape (`{id, type: 'function', function: {name, arguments}}`). */
export type ToolCall = ChatCompletionMessageToolCall;

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
  tool_calls?: ToolCall[] | undefined;
  /** Qwen3's `<think>` text, absent when the completion has none (or it is empty). */
  reasoning?: string | undefined;
  /**
   * When no call was parsed but the text holds tool-call markup (another family's, or this
   * family's written wrong): that markup's family (`hermes`, `llama3-json`, `mistral`,
   * `functionary`, `deepseek`, `command-r`). The text stays `content`.
   */
  unparsedToolCall?: string | undefined;
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
  /**
   * Rows of the model's embedding: `config.json`'s `vocab_size` when the folder has one and it is
   * larger (Qwen3 pads 151,669 ids to 151,936), else {@link vocabularySize}. Ids from
   * `vocabularySize` up are no token: they decode to nothing.
   */
  readonly modelVocabularySize: number;
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
  /**
   * The `token` string of a logprob entry: the token's text when its bytes are valid UTF-8, else
   * its bytes with printable ASCII as is and the others as `\xNN`. With `asTokenId`, and for an id
   * the tokenizer does not have (an embedding row beyond it), `token_id:<id>`.
   */
  tokenString(id: number, asTokenId?: boolean): string;
  /**
   * The id of a logprob entry this layer wrote (`token_id:<id>` below {@link modelVocabularySize},
   * else its `bytes`, else the UTF-8 of its `token`), or null when no token of this vocabulary has it.
   */
  recoverTokenId(entry: {
    readonly token: string;
    readonly bytes?: readonly number[] | null | undefined;
  }): number | null;
  /** The prompt text the model's own chat template renders for `messages`. */
  renderChat(messages: readonly ChatMessage[], options: ChatRenderOptions): string;
  /**
   * Splits a completion into content, tool calls and reasoning, the way this family writes them
   * (a stop token's text at the end, `<|im_end|>`, is left out).
   */
  parseAssistant(text: string, options?: ParseAssistantOptions): ParsedAssistant;
  /** Render + encode in one call; what the engine feeds the model. */
  encodeChat(messages: readonly ChatMessage[], options: ChatRenderOptions): number[];
}

/** Options of {@link loadTextLayer}. */
export interface TextLayerOptions {
  /** The clock of the template's `strftime_now` (Llama 3.2's "Today Date"). @default () => new Date() */
  readonly now?: (() => Date) | undefined;
}

type Json = Record<string, unknown>;

/** A byte of a token that is not valid UTF-8, as tiktoken-style APIs spell it. */
function byteString(byte: number): string {
  if (byte >= 0x20 && byte < 0x7f) return String.fromCharCode(byte);
  if (byte === 0x0a) return '\n';
  if (byte === 0x09) return '\t';
  return `\\x${byte.toString(16).padStart(2, '0')}`;
}

async function readJson(file: string, required: boolean): Promise<Json | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !required) return null;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error(
        `Expected ${path.basename(file)} in the model folder ${path.dirname(file)} (as \`huggingface-cli download\` leaves it), got no such file.`,
      );
    throw error;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(
      `Expected JSON in ${file}, got unparseable text (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`Expected a JSON object in ${file}, got ${JSON.stringify(value)?.slice(0, 80)}.`);
  return value as Json;
}

async function readText(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** A special token of tokenizer_config.json: a string, or an AddedToken object `{content}`. */
function tokenContent(value: unknown): string | null {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as Json)['content'] === 'string')
    return (value as Json)['content'] as string;
  return null;
}

const SPECIAL_TOKEN_KEYS = [
  'bos_token',
  'eos_token',
  'unk_token',
  'sep_token',
  'pad_token',
  'cls_token',
  'mask_token',
] as const;

/** The chat template text and where it came from: chat_template.jinja first, as transformers reads it. */
async function chatTemplateText(
  dir: string,
  config: Json,
): Promise<{ text: string; source: string; named: ReadonlyMap<string, string> } | null> {
  const file = path.join(dir, 'chat_template.jinja');
  const fromFile = await readText(file);
  if (fromFile !== null) return { text: fromFile, source: file, named: new Map() };
  const value = config['chat_template'];
  const source = path.join(dir, 'tokenizer_config.json');
  if (typeof value === 'string') return { text: value, source, named: new Map() };
  if (Array.isArray(value)) {
    // A list of named templates: "default", plus "tool_use" for requests with tools.
    const named = new Map<string, string>();
    for (const entry of value as Json[])
      if (typeof entry?.['name'] === 'string' && typeof entry['template'] === 'string')
        named.set(entry['name'], entry['template']);
    const text = named.get('default');
    if (text === undefined)
      throw new Error(
        `Expected a template named "default" in ${source}'s chat_template list, got ${JSON.stringify([...named.keys()])}.`,
      );
    return { text, source, named };
  }
  return null;
}

/** GPT-2's byte-to-character table of byte-level BPE, inverted: character -> byte. */
function byteLevelDecoder(): Map<string, number> {
  const bytes: number[] = [];
  for (let b = 0x21; b <= 0x7e; b += 1) bytes.push(b);
  for (let b = 0xa1; b <= 0xac; b += 1) bytes.push(b);
  for (let b = 0xae; b <= 0xff; b += 1) bytes.push(b);
  const chars = [...bytes];
  let extra = 0;
  for (let b = 0; b < 256; b += 1) {
    if (!bytes.includes(b)) {
      bytes.push(b);
      chars.push(256 + extra);
      extra += 1;
    }
  }
  return new Map(bytes.map((byte, index) => [String.fromCodePoint(chars[index] as number), byte]));
}

function usesByteLevel(component: unknown): boolean {
  if (typeof component !== 'object' || component === null) return false;
  const record = component as Json;
  if (record['type'] === 'ByteLevel') return true;
  for (const key of ['decoders', 'pretokenizers'])
    if (Array.isArray(record[key]) && (record[key] as unknown[]).some(usesByteLevel)) return true;
  return false;
}

function idsOf(value: unknown): number[] {
  if (typeof value === 'number' && Number.isInteger(value)) return [value];
  if (Array.isArray(value)) return value.filter((id): id is number => typeof id === 'number' && Number.isInteger(id));
  return [];
}

/** The tokenizers library's module (an optional dependency). */
type TokenizersModule = typeof import('@huggingface/tokenizers');
/** A tokenizer of the tokenizers library. */
type HfTokenizer = InstanceType<TokenizersModule['Tokenizer']>;

/** The chat templates of a folder, compiled: the default one, and the one for requests with tools. */
interface ChatTemplates {
  readonly main: ChatTemplate;
  readonly toolUse: ChatTemplate | null;
}

/** Imports the optional dependencies real models need, or says how to install them. */
async function importTextLibraries(): Promise<{ tokenizers: TokenizersModule; jinja: JinjaModule }> {
  try {
    const [tokenizers, jinja] = await Promise.all([import('@huggingface/tokenizers'), import('@huggingface/jinja')]);
    return { tokenizers, jinja };
  } catch (error) {
    throw new Error(
      `Real models need the optional dependencies @huggingface/tokenizers and @huggingface/jinja (npm install @huggingface/tokenizers @huggingface/jinja); importing them failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** The folder's tokenizer, or an error naming the folder when the library cannot load its tokenizer.json. */
function createTokenizer(tokenizers: TokenizersModule, tokenizerJson: Json, config: Json, dir: string): HfTokenizer {
  try {
    return new tokenizers.Tokenizer(tokenizerJson, config);
  } catch (error) {
    throw new Error(
      `Expected a tokenizer.json that @huggingface/tokenizers can load in ${dir}, got an error: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

/** The special tokens of tokenizer_config.json by key (`bos_token`, `eos_token`, ...), as the template reads them. */
function specialTokensOf(config: Json): Json {
  const specialTokens: Json = {};
  for (const key of SPECIAL_TOKEN_KEYS) {
    const content = tokenContent(config[key]);
    if (content !== null) specialTokens[key] = content;
  }
  return specialTokens;
}

/** The folder's chat templates compiled, or null when it has none. */
function compileTemplates(
  jinja: JinjaModule,
  templateSource: Awaited<ReturnType<typeof chatTemplateText>>,
): ChatTemplates | null {
  if (!templateSource) return null;
  const toolUseText = templateSource.named.get('tool_use');
  return {
    main: compileChatTemplate(jinja, templateSource.text, templateSource.source),
    toolUse:
      toolUseText === undefined ? null : compileChatTemplate(jinja, toolUseText, `${templateSource.source} (tool_use)`),
  };
}

/** {@link TextLayer.renderChat} over the folder's templates (an input error when it has none). */
function chatRenderer(
  dir: string,
  templates: ChatTemplates | null,
  specialTokens: Json,
  now: () => Date,
): (messages: readonly ChatMessage[], renderOptions: ChatRenderOptions) => string {
  return (messages, renderOptions) => {
    if (!templates)
      throw new EngineInputError(
        `The model folder ${dir} has no chat template (neither chat_template.jinja nor a chat_template in tokenizer_config.json); chat requests need an instruct model.`,
        ['body', 'model'],
      );
    const tools = templateTools(renderOptions.tools);
    const template = tools && templates.toolUse ? templates.toolUse : templates.main;
    if (tools && !template.readsTools)
      throw new EngineInputError(
        `The chat template of ${template.source} does not render tools (it never reads \`tools\`), so this model cannot be offered tools; send the request without tools or use a model whose template supports them (Qwen3, Llama 3.1+).`,
        ['body', 'tools'],
      );
    return template.render({
      ...specialTokens,
      ...renderOptions.templateVariables,
      messages: templateMessages(messages),
      tools,
      documents: null,
      add_generation_prompt: renderOptions.addGenerationPrompt,
      strftime_now: (format: unknown) => strftime(now(), String(format)),
    });
  };
}

/**
 * {@link TextLayer.tokenBytes} of a tokenizer: an added token's UTF-8, a byte-level piece through
 * `byteOf` (GPT-2's table), else a SentencePiece piece (byte fallback, ▁ for spaces).
 */
function tokenBytesReader(
  tokenizer: HfTokenizer,
  addedTokens: ReturnType<HfTokenizer['get_added_tokens_decoder']>,
  byteOf: Map<string, number> | null,
  utf8: TextEncoder,
): (id: number) => number[] {
  return (id) => {
    const added = addedTokens.get(id);
    if (added) return [...utf8.encode(added.content)];
    const piece = tokenizer.id_to_token(id);
    if (piece === undefined) return [];
    if (byteOf) return [...piece].map((char) => byteOf.get(char) ?? 0x3f);
    // SentencePiece-style vocabularies (Llama 2, TinyLlama): byte-fallback tokens and ▁ for spaces.
    const byteFallback = /^<0x([0-9A-Fa-f]{2})>$/.exec(piece);
    if (byteFallback) return [Number.parseInt(byteFallback[1] as string, 16)];
    return [...utf8.encode(piece.replaceAll('\u2581', ' '))];
  };
}

/**
 * Loads the text layer of a Hugging Face model folder: `tokenizer.json` and
 * `tokenizer_config.json` (required), `chat_template.jinja` (preferred over the config's
 * `chat_template`, as transformers does) and `generation_config.json` (optional).
 * Needs the optional dependencies `@huggingface/tokenizers` and `@huggingface/jinja`.
 *
 * @example
 * const text = await loadTextLayer('/models/Qwen3-0.6B');
 * const ids = text.encodeChat([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true });
 * const { content, tool_calls, reasoning } = text.parseAssistant(text.decode(sampledIds));
 */
export async function loadTextLayer(dir: string, options: TextLayerOptions = {}): Promise<TextLayer> {
  const { tokenizers, jinja } = await importTextLibraries();
  const tokenizerJson = (await readJson(path.join(dir, 'tokenizer.json'), true)) as Json;
  const config = (await readJson(path.join(dir, 'tokenizer_config.json'), true)) as Json;
  const generation = (await readJson(path.join(dir, 'generation_config.json'), false)) ?? {};
  const modelConfig = (await readJson(path.join(dir, 'config.json'), false)) ?? {};
  const templateSource = await chatTemplateText(dir, config);
  const tokenizer = createTokenizer(tokenizers, tokenizerJson, config, dir);

  const vocabulary = tokenizer.get_vocab(true);
  let vocabularySize = 0;
  for (const id of vocabulary.values()) vocabularySize = Math.max(vocabularySize, id + 1);
  const configRows = modelConfig['vocab_size'];
  const modelVocabularySize =
    typeof configRows === 'number' && Number.isInteger(configRows) && configRows > vocabularySize
      ? configRows
      : vocabularySize;
  const addedTokens = tokenizer.get_added_tokens_decoder();

  const specialTokens = specialTokensOf(config);
  const idOf = (content: unknown): number | null => {
    if (typeof content !== 'string') return null;
    return tokenizer.token_to_id(content) ?? null;
  };
  const bosTokenId = idOf(specialTokens['bos_token']);
  const stopTokenIds = [...new Set([...idsOf(generation['eos_token_id']), ...idsOf(idOf(specialTokens['eos_token']))])];
  if (stopTokenIds.length === 0)
    throw new Error(
      `Expected an end-of-turn token in ${dir} (generation_config.json's eos_token_id or tokenizer_config.json's eos_token), got neither.`,
    );

  const templates = compileTemplates(jinja, templateSource);
  const templateText = templateSource ? [templateSource.text, ...templateSource.named.values()].join('\n') : '';
  const toolCallFormat: ToolCallFormat =
    !templateText.includes('<tool_call>') && templateText.includes('<|start_header_id|>') ? 'llama3-json' : 'hermes';

  const byteLevel = usesByteLevel(tokenizerJson['decoder']) || usesByteLevel(tokenizerJson['pre_tokenizer']);
  const utf8 = new TextEncoder();
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

  const encode = (text: string): number[] => tokenizer.encode(text, { add_special_tokens: false }).ids;
  const renderChat = chatRenderer(dir, templates, specialTokens, options.now ?? (() => new Date()));
  const tokenBytes = tokenBytesReader(tokenizer, addedTokens, byteLevel ? byteLevelDecoder() : null, utf8);
  let idOfBytes: Map<string, number> | null = null;
  const stopTexts = stopTokenIds.map((id) => addedTokens.get(id)?.content ?? '').filter((ending) => ending.length > 0);

  return {
    vocabularySize,
    modelVocabularySize,
    stopTokenIds,
    bosTokenId,
    toolCallFormat,
    encode,
    decode(ids, decodeOptions = {}) {
      return tokenizer.decode([...ids], {
        skip_special_tokens: decodeOptions.skipSpecialTokens ?? false,
        clean_up_tokenization_spaces: false,
      });
    },
    tokenBytes,
    tokenString(id, asTokenId = false) {
      if (asTokenId || id >= vocabularySize) return `token_id:${id}`;
      const bytes = tokenBytes(id);
      try {
        return strictUtf8.decode(Uint8Array.from(bytes));
      } catch {
        return bytes.map(byteString).join('');
      }
    },
    recoverTokenId(entry) {
      const match = /^token_id:(\d+)$/.exec(entry.token);
      if (match) {
        const id = Number(match[1]);
        return id < modelVocabularySize ? id : null;
      }
      const bytes = entry.bytes ?? [...utf8.encode(entry.token)];
      if (bytes.length === 0) return null;
      if (!idOfBytes) {
        // Built on first use: ~150k keys. Ascending ids, so a shared spelling keeps the lower id.
        idOfBytes = new Map();
        for (let id = 0; id < vocabularySize; id += 1) {
          const key = tokenBytes(id).join(',');
          if (key.length > 0 && !idOfBytes.has(key)) idOfBytes.set(key, id);
        }
      }
      return idOfBytes.get(bytes.join(',')) ?? null;
    },
    renderChat,
    parseAssistant(text, parseOptions = {}) {
      // A completion decoded with its stop token (`<|im_end|>`) is read without it.
      let body = text;
      for (const ending of stopTexts) if (body.endsWith(ending)) body = body.slice(0, -ending.length);
      return parseAssistantText(body, toolCallFormat, parseOptions);
    },
    encodeChat(messages, renderOptions) {
      return encode(renderChat(messages, renderOptions));
    },
  };
}
