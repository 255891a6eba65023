import { describe, expect, it } from 'vitest';
import { END_TOKEN_ID, SPECIAL_TOKENS, VOCABULARY_SIZE, decodeTokens, encodeText, recoverTokenId, tokenBytes, tokenString } from '../../src/engine/index.js';

describe('byte-level tokenizer', () => {
  it('round-trips any UTF-8 text exactly', () => {
    const samples = ['', 'hello world', 'Grüße, 世界! 🎉👩‍👩‍👧', 'tabs\tand\nnewlines\r\n', '\u0000\u007f', 'x'.repeat(1000), '<|end|> typed by a user'];
    for (const text of samples) expect(decodeTokens(encodeText(text))).toBe(text);
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
