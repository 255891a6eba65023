/**
 * The `token` strings of logprob entries for a Hugging Face tokenizer, and the way back from an
 * entry to its token id (so that an RL job trains exactly the sampled tokens).
 *
 * A token whose decoded text is non-empty, whole (no U+FFFD from a cut UTF-8 character) and
 * unique in the vocabulary is shown as that text, with its UTF-8 `bytes`. Any other token (special
 * tokens such as `<|im_end|>`, byte fragments) is shown as `token_id:<id>` with `bytes: null`.
 */
import type { TextLayer } from './text.js';

/** Token strings of a vocabulary, built once per text layer. */
export class TokenStrings {
  private readonly strings: string[];
  private readonly ids = new Map<string, number>();

  constructor(text: TextLayer) {
    const decoded: string[] = [];
    const counts = new Map<string, number>();
    for (let id = 0; id < text.vocabularySize; id += 1) {
      const value = text.decode([id]);
      decoded.push(value);
      counts.set(value, (counts.get(value) ?? 0) + 1);
    }
    this.strings = decoded.map((value, id) => {
      if (value === '' || value.includes('\uFFFD') || value.startsWith('token_id:') || counts.get(value) !== 1)
        return `token_id:${id}`;
      this.ids.set(value, id);
      return value;
    });
  }

  /** The `token` of an id (`token_id:<id>` when asked for ids, or when the text is ambiguous). */
  tokenString(id: number, asIds = false): string {
    if (asIds) return `token_id:${id}`;
    return this.strings[id] ?? `token_id:${id}`;
  }

  /** The `bytes` of an id: the UTF-8 of its text, or null for a `token_id:` token. */
  tokenBytes(id: number): number[] | null {
    const value = this.strings[id];
    if (value === undefined || value === `token_id:${id}`) return null;
    return [...new TextEncoder().encode(value)];
  }

  /** The id of a logprob entry, or null when it names no token of this vocabulary. */
  recoverTokenId(entry: { readonly token: string }): number | null {
    const match = /^token_id:(\d+)$/.exec(entry.token);
    if (match) {
      const id = Number(match[1]);
      return id < this.strings.length ? id : null;
    }
    return this.ids.get(entry.token) ?? null;
  }
}
