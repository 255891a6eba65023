/**
 * Byte-level tokenizer: ids 0..255 are the bytes of UTF-8 text, ids from 256 up are special
 * tokens of the chat template. Any text round-trips exactly because every byte is a token, and
 * text that merely looks like a special token (`"<|end|>"` typed by a user) is encoded as bytes,
 * never as the special token.
 *
 * {@link Tokenizer} is what the chat template, the sampler and the trainer use; each base model
 * names its tokenizer (`byte` here, `bpe` in `bpe.ts`, which adds merged tokens after the special
 * tokens and keeps every id below them as it is here).
 */

/** The special tokens, in id order starting at 256. */
export const SPECIAL_TOKENS = [
  '<|end|>',
  '<|system|>',
  '<|developer|>',
  '<|user|>',
  '<|assistant|>',
  '<|tool|>',
  '<|function|>',
  '<|tools|>',
  '<|tool_call|>',
  '<|/tool_call|>',
] as const;

/** Name of a special token. */
export type SpecialToken = (typeof SPECIAL_TOKENS)[number];

/** Number of byte tokens (ids below this are bytes). */
export const BYTE_TOKEN_COUNT = 256;

/** Size of the vocabulary: 256 bytes plus the special tokens. */
export const VOCABULARY_SIZE = BYTE_TOKEN_COUNT + SPECIAL_TOKENS.length;

const specialIds = new Map<string, number>(SPECIAL_TOKENS.map((name, index) => [name, BYTE_TOKEN_COUNT + index]));

/** Id of a special token. */
export function specialTokenId(name: SpecialToken): number {
  return BYTE_TOKEN_COUNT + SPECIAL_TOKENS.indexOf(name);
}

/** Id of `<|end|>`, which ends every turn (the end-of-sequence token of generation). */
export const END_TOKEN_ID = specialTokenId('<|end|>');

/** True when `id` is a special token rather than a byte. */
export function isSpecialToken(id: number): boolean {
  return id >= BYTE_TOKEN_COUNT;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Encodes text as UTF-8 byte tokens (never special tokens). A lone surrogate (a JS string that is
 * not well-formed UTF-16, hence has no UTF-8 form) is encoded as U+FFFD, as every UTF-8 encoder does;
 * every well-formed string round-trips exactly through {@link decodeTokens}.
 */
export function encodeText(text: string): number[] {
  return Array.from(encoder.encode(text));
}

/**
 * Decodes token ids to text: bytes as UTF-8 (invalid sequences become U+FFFD), special tokens as
 * their names.
 */
export function decodeTokens(ids: readonly number[]): string {
  return decodeTokenIds(ids, (id) => (id < BYTE_TOKEN_COUNT ? [id] : undefined));
}

/**
 * Decodes token ids with any byte-level vocabulary: special tokens as their names, every other
 * token as the bytes `bytesOf` gives it, consecutive bytes decoded together as UTF-8 (so a
 * character split across tokens comes out whole; invalid sequences become U+FFFD). Both the byte
 * tokenizer and the BPE tokenizer decode through it.
 */
export function decodeTokenIds(ids: readonly number[], bytesOf: (id: number) => readonly number[] | undefined): string {
  let text = '';
  let pending: number[] = [];
  const flush = (): void => {
    if (pending.length > 0) text += decoder.decode(Uint8Array.from(pending));
    pending = [];
  };
  for (const id of ids) {
    if (id >= BYTE_TOKEN_COUNT && id < VOCABULARY_SIZE) {
      flush();
      text += SPECIAL_TOKENS[id - BYTE_TOKEN_COUNT] ?? '';
    } else {
      for (const byte of bytesOf(id) ?? []) pending.push(byte);
    }
  }
  flush();
  return text;
}

/**
 * The `bytes` of a token in OpenAI's logprob shape: the byte itself for a byte token, the UTF-8 of
 * the name for a special token (always more than one byte, which is how the two are told apart).
 */
export function tokenBytes(id: number): number[] {
  if (isSpecialToken(id)) return encodeText(SPECIAL_TOKENS[id - BYTE_TOKEN_COUNT] ?? '');
  return [id];
}

/**
 * The `token` string of a token in OpenAI's logprob shape: the character for a printable ASCII
 * byte, the name for a special token, and a `\xNN` escape for other bytes (pieces of multi-byte
 * characters and control bytes), as tiktoken-style APIs do. With `asTokenId`, `token_id:<id>`.
 */
export function tokenString(id: number, asTokenId = false): string {
  if (asTokenId) return `token_id:${id}`;
  if (isSpecialToken(id)) return SPECIAL_TOKENS[id - BYTE_TOKEN_COUNT] ?? '';
  if (id >= 0x20 && id < 0x7f) return String.fromCharCode(id);
  if (id === 0x0a) return '\n';
  if (id === 0x09) return '\t';
  return `\\x${id.toString(16).padStart(2, '0')}`;
}

/**
 * Recovers the token id of a logprob entry written by this engine: `token_id:<id>` strings first,
 * then a one-byte `bytes` (a byte token), then a special token's name. Returns null when the
 * entry cannot have come from this tokenizer.
 */
export function recoverTokenId(entry: {
  readonly token: string;
  readonly bytes?: readonly number[] | null | undefined;
}): number | null {
  const match = /^token_id:(\d+)$/.exec(entry.token);
  if (match) {
    const id = Number(match[1]);
    return id < VOCABULARY_SIZE ? id : null;
  }
  const bytes = entry.bytes;
  if (bytes && bytes.length === 1) {
    const byte = bytes[0] ?? -1;
    return byte >= 0 && byte < BYTE_TOKEN_COUNT ? byte : null;
  }
  const special = specialIds.get(entry.token);
  if (special !== undefined) return special;
  if (!bytes) {
    // No bytes: a printable one-character token string is its own byte.
    const encoded = encodeText(entry.token);
    if (encoded.length === 1) return encoded[0] ?? null;
  }
  return null;
}

/** Entry of a logprob list, as {@link Tokenizer.recoverTokenId} reads it. */
export interface LogprobTokenEntry {
  readonly token: string;
  readonly bytes?: readonly number[] | null | undefined;
}

/**
 * A tokenizer of the engine. Every tokenizer keeps ids 0-255 as bytes and 256-265 as the special
 * tokens, so the chat template's special ids are the same for all of them.
 */
export interface Tokenizer {
  /** Name of the tokenizer (`byte` or `bpe`), as listed in docs/engine.md. */
  readonly name: string;
  /** Number of token ids (bytes, special tokens and merged tokens). */
  readonly vocabularySize: number;
  /** Encodes text (never as special tokens); lossless for every well-formed string. */
  encodeText(text: string): number[];
  /** Decodes ids: bytes as UTF-8 (invalid sequences become U+FFFD), special tokens as their names. */
  decodeTokens(ids: readonly number[]): string;
  /** The `bytes` of a token in OpenAI's logprob shape. */
  tokenBytes(id: number): number[];
  /** The `token` string of a token in OpenAI's logprob shape. */
  tokenString(id: number, asTokenId?: boolean): string;
  /** The id of a logprob entry written by this tokenizer, or null. */
  recoverTokenId(entry: LogprobTokenEntry): number | null;
}

/** The byte-level tokenizer (`policyloop/tiny-chat`, `policyloop/small-chat`). */
export const BYTE_TOKENIZER: Tokenizer = {
  name: 'byte',
  vocabularySize: VOCABULARY_SIZE,
  encodeText,
  decodeTokens,
  tokenBytes,
  tokenString,
  recoverTokenId,
};
