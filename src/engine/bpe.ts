/**
 * Byte-pair-encoding tokenizer: the byte tokenizer's ids (0-255 bytes, 256-265 special tokens)
 * plus merged tokens from 266 up, each the concatenation of two earlier tokens. The merges are
 * learned by `scripts/learn-bpe-merges.ts` on a generated corpus of agent prompts and shipped as
 * data (`src/engine/data/bpe-merges.json`).
 *
 * Encoding splits text into pieces with {@link PRETOKENIZE_PATTERN} (words with their leading
 * space, runs of punctuation such as `":"`, runs of up to 3 digits, whitespace), then merges each
 * piece's UTF-8 bytes, lowest merge rank first. Every byte stays a token, so any text round-trips
 * exactly, and the same text always gives the same ids. Text that looks like a special token is
 * encoded as ordinary tokens, never as the special token.
 */
import { readFileSync } from 'node:fs';
import { BYTE_TOKEN_COUNT, SPECIAL_TOKENS, VOCABULARY_SIZE, decodeTokenIds, specialTokenId } from './tokenizer.js';
import type { LogprobTokenEntry, Tokenizer } from './tokenizer.js';

/**
 * How text is split before merging: contractions, a letter run with its leading space, up to 3
 * digits with a leading space, a punctuation run with a leading space, whitespace (a run before a
 * word leaves its last space to the word). Merges never cross a piece boundary.
 */
export const PRETOKENIZE_PATTERN = /'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/** The shipped merges file: `merges[i]` makes token `266 + i` from two earlier token ids. */
export interface BpeMergesFile {
  readonly format: 'policyloop-bpe-merges';
  readonly version: 1;
  /** Pairs of token ids, in merge order (rank). */
  readonly merges: readonly (readonly [number, number])[];
}

const encoder = new TextEncoder();
/** Most pieces remembered by an encoder (the cache is emptied when full). */
const PIECE_CACHE_SIZE = 50_000;

function byteString(byte: number): string {
  if (byte >= 0x20 && byte < 0x7f) return String.fromCharCode(byte);
  if (byte === 0x0a) return '\n';
  if (byte === 0x09) return '\t';
  return `\\x${byte.toString(16).padStart(2, '0')}`;
}

/** Splits text into the pieces that merges apply to (their concatenation is the text). */
export function pretokenize(text: string): string[] {
  const pieces: string[] = [];
  let last = 0;
  for (const match of text.matchAll(PRETOKENIZE_PATTERN)) {
    const at = match.index ?? 0;
    // The pattern covers every character; a gap would still be kept, never dropped.
    if (at > last) pieces.push(text.slice(last, at));
    pieces.push(match[0]);
    last = at + match[0].length;
  }
  if (last < text.length) pieces.push(text.slice(last));
  return pieces;
}

/**
 * Creates a BPE tokenizer from merges. Throws when a merge refers to a later token, repeats the
 * bytes of another token, or spells a special token's name (ids must be recoverable from `bytes`).
 */
export function createBpeTokenizer(merges: readonly (readonly [number, number])[], name = 'bpe'): Tokenizer {
  const vocabularySize = VOCABULARY_SIZE + merges.length;
  const bytesOf: number[][] = [];
  for (let id = 0; id < BYTE_TOKEN_COUNT; id += 1) bytesOf.push([id]);
  for (const special of SPECIAL_TOKENS) bytesOf.push(Array.from(encoder.encode(special)));
  const idOfBytes = new Map<string, number>();
  for (let id = 0; id < BYTE_TOKEN_COUNT; id += 1) idOfBytes.set(String(id), id);
  const specialNames = new Set(SPECIAL_TOKENS.map((special) => Array.from(encoder.encode(special)).join(',')));
  const ranks = new Map<number, number>();
  merges.forEach(([left, right], rank) => {
    const id = VOCABULARY_SIZE + rank;
    const valid = (part: number): boolean =>
      Number.isInteger(part) && part >= 0 && part < id && (part < BYTE_TOKEN_COUNT || part >= VOCABULARY_SIZE);
    if (!valid(left) || !valid(right))
      throw new Error(
        `Expected merge ${rank} to join two earlier byte or merged tokens, got [${left}, ${right}] for token ${id}.`,
      );
    const bytes = [...(bytesOf[left] as number[]), ...(bytesOf[right] as number[])];
    const key = bytes.join(',');
    if (idOfBytes.has(key) || specialNames.has(key))
      throw new Error(`Expected merge ${rank} to make new bytes, got the bytes of token ${idOfBytes.get(key) ?? key}.`);
    bytesOf.push(bytes);
    idOfBytes.set(key, id);
    ranks.set(left * 65_536 + right, rank);
  });

  const cache = new Map<string, number[]>();
  const encodePiece = (piece: string): number[] => {
    const cached = cache.get(piece);
    if (cached) return cached;
    const ids = Array.from(encoder.encode(piece));
    while (ids.length > 1) {
      let bestRank = Number.POSITIVE_INFINITY;
      for (let index = 0; index + 1 < ids.length; index += 1) {
        const rank = ranks.get((ids[index] as number) * 65_536 + (ids[index + 1] as number));
        if (rank !== undefined && rank < bestRank) bestRank = rank;
      }
      if (bestRank === Number.POSITIVE_INFINITY) break;
      const [left, right] = merges[bestRank] as readonly [number, number];
      const merged = VOCABULARY_SIZE + bestRank;
      let write = 0;
      for (let read = 0; read < ids.length; read += 1) {
        if (read + 1 < ids.length && ids[read] === left && ids[read + 1] === right) {
          ids[write] = merged;
          read += 1;
        } else {
          ids[write] = ids[read] as number;
        }
        write += 1;
      }
      ids.length = write;
    }
    if (cache.size >= PIECE_CACHE_SIZE) cache.clear();
    cache.set(piece, ids);
    return ids;
  };

  const tokenBytes = (id: number): number[] => [...(bytesOf[id] ?? [])];
  return {
    name,
    vocabularySize,
    encodeText(text: string): number[] {
      const ids: number[] = [];
      for (const piece of pretokenize(text)) for (const id of encodePiece(piece)) ids.push(id);
      return ids;
    },
    decodeTokens(ids: readonly number[]): string {
      return decodeTokenIds(ids, (id) => bytesOf[id]);
    },
    tokenBytes,
    tokenString(id: number, asTokenId = false): string {
      if (asTokenId) return `token_id:${id}`;
      if (id >= BYTE_TOKEN_COUNT && id < VOCABULARY_SIZE) return SPECIAL_TOKENS[id - BYTE_TOKEN_COUNT] ?? '';
      return (bytesOf[id] ?? []).map(byteString).join('');
    },
    recoverTokenId(entry: LogprobTokenEntry): number | null {
      const match = /^token_id:(\d+)$/.exec(entry.token);
      if (match) {
        const id = Number(match[1]);
        return id < vocabularySize ? id : null;
      }
      const special = (SPECIAL_TOKENS as readonly string[]).indexOf(entry.token);
      const bytes = entry.bytes;
      if (special >= 0 && (!bytes || bytes.join(',') === encoder.encode(entry.token).join(',')))
        return specialTokenId(SPECIAL_TOKENS[special] as (typeof SPECIAL_TOKENS)[number]);
      if (bytes && bytes.length > 0) return idOfBytes.get(bytes.join(',')) ?? null;
      if (bytes) return null;
      // No bytes: a token string without escapes spells its own bytes.
      if (entry.token.includes('\\')) return null;
      return idOfBytes.get(Array.from(encoder.encode(entry.token)).join(',')) ?? null;
    },
  };
}

/** Path of the shipped merges file. */
export const BPE_MERGES_URL = new URL('./data/bpe-merges.json', import.meta.url);

let shipped: Tokenizer | null = null;

/** Reads and checks a merges file's JSON. */
export function parseBpeMerges(json: string): BpeMergesFile {
  const value = JSON.parse(json) as Partial<BpeMergesFile>;
  if (value.format !== 'policyloop-bpe-merges' || value.version !== 1 || !Array.isArray(value.merges))
    throw new Error(
      `Expected a merges file {format: "policyloop-bpe-merges", version: 1, merges: [...]}, got format ${JSON.stringify(value.format)}.`,
    );
  return value as BpeMergesFile;
}

/** The BPE tokenizer of the shipped merges (`policyloop/agent-chat`), loaded once per thread. */
export function bpeTokenizer(): Tokenizer {
  if (!shipped) shipped = createBpeTokenizer(parseBpeMerges(readFileSync(BPE_MERGES_URL, 'utf8')).merges);
  return shipped;
}
