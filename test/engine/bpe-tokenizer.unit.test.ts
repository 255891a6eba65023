import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BPE_MERGES_URL, createBpeTokenizer, parseBpeMerges } from '../../src/engine/bpe.js';
import { renderPrompt } from '../../src/engine/chat-template.js';
import {
  AGENT_CHAT,
  END_TOKEN_ID,
  SPECIAL_TOKENS,
  TINY_CHAT,
  decodeTokens,
  tokenizerOf,
} from '../../src/engine/index.js';
import { SeededRandom } from '../../src/engine/random.js';
import { AGENT_TOOLS, agentMessages } from './support/agent-prompt.js';

const bpe = tokenizerOf(AGENT_CHAT);

function randomText(random: SeededRandom, length: number): string {
  const ranges: [number, number][] = [
    [0x20, 0x7e],
    [0x00, 0x7f],
    [0x80, 0x7ff],
    [0x800, 0xd7ff],
    [0xe000, 0xffff],
    [0x10000, 0x10ffff],
  ];
  let text = '';
  for (let index = 0; index < length; index += 1) {
    const [low, high] = ranges[Math.floor(random.next() * ranges.length)] as [number, number];
    text += String.fromCodePoint(low + Math.floor(random.next() * (high - low + 1)));
  }
  return text;
}

describe('BPE tokenizer of policyloop/agent-chat', () => {
  it('round-trips random unicode and random words exactly (property test, 500 strings)', () => {
    const random = new SeededRandom(99);
    const words = ['the', ' tool', '":"', '{"', 'name', ' 2026', '\n\n', '  ', 'é', '世界', '🎉', '<|end|>'];
    for (let sample = 0; sample < 500; sample += 1) {
      const text =
        sample % 2 === 0
          ? randomText(random, 1 + Math.floor(random.next() * 40))
          : Array.from({ length: 20 }, () => words[Math.floor(random.next() * words.length)]).join('');
      expect(bpe.decodeTokens(bpe.encodeText(text))).toBe(text);
    }
  });

  it('round-trips every byte value and encodes a lone surrogate as U+FFFD, as the byte tokenizer does', () => {
    const bytes = Array.from({ length: 128 }, (_, byte) => String.fromCharCode(byte)).join('');
    expect(bpe.decodeTokens(bpe.encodeText(bytes))).toBe(bytes);
    expect(bpe.decodeTokens(bpe.encodeText('a\ud800b'))).toBe('a\ufffdb');
    // Ids that are not valid UTF-8 on their own (a cut character) decode to U+FFFD.
    expect(bpe.decodeTokens([0xe4])).toBe('\ufffd');
  });

  it('never produces special tokens from text', () => {
    const ids = bpe.encodeText('<|end|><|assistant|><|tool_call|>');
    expect(ids.some((id) => id >= 256 && id < 266)).toBe(false);
    expect(bpe.decodeTokens(ids)).toBe('<|end|><|assistant|><|tool_call|>');
  });

  it('loads the shipped merges deterministically, with the vocabulary size of the model', () => {
    const file = parseBpeMerges(readFileSync(BPE_MERGES_URL, 'utf8'));
    expect(256 + SPECIAL_TOKENS.length + file.merges.length).toBe(AGENT_CHAT.vocabularySize);
    const again = createBpeTokenizer(file.merges);
    const text = decodeTokens(renderPrompt(agentMessages(3), AGENT_TOOLS));
    expect(again.encodeText(text)).toEqual(bpe.encodeText(text));
    expect(bpe.encodeText(text)).toEqual(bpe.encodeText(text));
  });

  it('refuses merges that reuse the bytes of another token or refer to later tokens', () => {
    expect(() =>
      createBpeTokenizer([
        [97, 98],
        [97, 98],
      ]),
    ).toThrow(/Expected merge 1 to make new bytes/);
    expect(() => createBpeTokenizer([[97, 300]])).toThrow(/Expected merge 0 to join two earlier/);
    expect(() => parseBpeMerges('{"format":"other"}')).toThrow(/Expected a merges file/);
  });

  it('recovers every token id from its logprob entry (token string and bytes)', () => {
    for (let id = 0; id < bpe.vocabularySize; id += 1) {
      const entry = { token: bpe.tokenString(id), bytes: bpe.tokenBytes(id) };
      expect(bpe.recoverTokenId(entry)).toBe(id);
      expect(bpe.recoverTokenId({ token: bpe.tokenString(id, true) })).toBe(id);
    }
    expect(bpe.tokenString(END_TOKEN_ID)).toBe('<|end|>');
    expect(bpe.recoverTokenId({ token: 'x', bytes: [1, 2, 3, 4, 5, 6, 7, 8, 9] })).toBeNull();
  });

  it('packs the ~6,000-character agent prompt into under half the tokens of the byte tokenizer', () => {
    const byteIds = renderPrompt(agentMessages(0), AGENT_TOOLS, tokenizerOf(TINY_CHAT));
    const text = decodeTokens(byteIds);
    const bpeIds = renderPrompt(agentMessages(0), AGENT_TOOLS, bpe);
    expect(text.length).toBeGreaterThan(5500);
    expect(bpeIds.length / text.length).toBeLessThan(0.45);
    expect(bpeIds.length * 2).toBeLessThan(byteIds.length);
    expect(bpeIds.length).toBeLessThan(AGENT_CHAT.contextLength / 1.5);
  });
});
