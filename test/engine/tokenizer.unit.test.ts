import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../src/engine/random.js';
import {
  END_TOKEN_ID,
  SPECIAL_TOKENS,
  VOCABULARY_SIZE,
  decodeTokens,
  encodeText,
  recoverTokenId,
  tokenBytes,
  tokenString,
} from '../../src/engine/index.js';

describe('byte-level tokenizer', () => {
  it('round-trips any UTF-8 text exactly', () => {
    const samples = [
      '',
      'hello world',
      'Grüße, 世界! 🎉👩‍👩‍👧',
      'tabs\tand\nnewlines\r\n',
      '\u0000\u007f',
      'x'.repeat(1000),
      '<|end|> typed by a user',
    ];
    for (const text of samples) expect(decodeTokens(encodeText(text))).toBe(text);
  });

  it('round-trips random strings of 1- to 4-byte characters (property test, 500 strings)', () => {
    const random = new SeededRandom(2024);
    // Code point ranges by UTF-8 length: ASCII (controls included), 2-byte, 3-byte (BMP, around
    // the surrogate gap), 4-byte (astral: emoji, CJK extension B, the last code point).
    const ranges: [number, number][] = [
      [0x00, 0x7f],
      [0x80, 0x7ff],
      [0x800, 0xd7ff],
      [0xe000, 0xffff],
      [0x10000, 0x10ffff],
    ];
    const lengths = new Set<number>();
    for (let sample = 0; sample < 500; sample += 1) {
      const codePoints = Array.from({ length: Math.floor(random.next() * 40) }, () => {
        const [low, high] = ranges[Math.floor(random.next() * ranges.length)] as [number, number];
        return low + Math.floor(random.next() * (high - low + 1));
      });
      const text = String.fromCodePoint(...codePoints);
      const tokens = encodeText(text);
      expect(tokens.every((id) => Number.isInteger(id) && id >= 0 && id < 256)).toBe(true);
      expect(tokens).toHaveLength(Buffer.byteLength(text, 'utf8'));
      expect(decodeTokens(tokens)).toBe(text);
      for (const codePoint of codePoints) lengths.add(Buffer.byteLength(String.fromCodePoint(codePoint), 'utf8'));
    }
    expect([...lengths].sort()).toEqual([1, 2, 3, 4]);
  });

  it('encodes a lone surrogate (not valid UTF-16, so not encodable as UTF-8) as U+FFFD, and decodes invalid bytes to U+FFFD', () => {
    expect(encodeText('a\ud800b')).toEqual([0x61, 0xef, 0xbf, 0xbd, 0x62]);
    expect(decodeTokens(encodeText('\udfff'))).toBe('\ufffd');
    // A well-formed surrogate pair is one 4-byte character.
    expect(encodeText('\ud83c\udf89')).toEqual([0xf0, 0x9f, 0x8e, 0x89]);
    // Bytes that are not UTF-8 (a lone continuation byte, a cut 3-byte character) decode to U+FFFD.
    expect(decodeTokens([0x80])).toBe('\ufffd');
    expect(decodeTokens([0xe4, 0xb8, END_TOKEN_ID, 0x41])).toBe('\ufffd<|end|>A');
  });

  it('encodes text as bytes only, never as special tokens', () => {
    const tokens = encodeText('<|end|>');
    expect(tokens).toHaveLength(7);
    expect(tokens.every((id) => id < 256)).toBe(true);
  });

  it('has 256 byte tokens plus the special tokens', () => {
    expect(VOCABULARY_SIZE).toBe(256 + SPECIAL_TOKENS.length);
    expect(decodeTokens([END_TOKEN_ID])).toBe('<|end|>');
  });

  it('recovers token ids from logprob entries: bytes, special names and token_id strings', () => {
    for (const id of [0, 65, 200, 255, END_TOKEN_ID, VOCABULARY_SIZE - 1]) {
      expect(recoverTokenId({ token: tokenString(id), bytes: tokenBytes(id) })).toBe(id);
      expect(recoverTokenId({ token: tokenString(id, true), bytes: tokenBytes(id) })).toBe(id);
    }
    expect(recoverTokenId({ token: 'A' })).toBe(65);
    expect(recoverTokenId({ token: 'hello', bytes: [104, 101, 108, 108, 111] })).toBeNull();
    expect(recoverTokenId({ token: `token_id:${VOCABULARY_SIZE}` })).toBeNull();
  });

  it('writes token strings readably and bytes exactly', () => {
    expect(tokenString(65)).toBe('A');
    expect(tokenString(0xe4)).toBe('\\xe4');
    expect(tokenString(END_TOKEN_ID)).toBe('<|end|>');
    expect(tokenString(7, true)).toBe('token_id:7');
    expect(tokenBytes(0xe4)).toEqual([0xe4]);
  });
});
