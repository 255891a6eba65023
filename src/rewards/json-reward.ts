/** Built-in reward: the final answer is valid JSON, optionally of a given shape. */
import type { RunReadOptions } from '../schema/index.js';
import type { RewardFn } from './reward-function.js';
import { finalAssistantText } from './trajectory-text.js';

/** Anything with zod's `safeParse` (a zod schema, or any validator shaped like one). */
export interface SafeParser {
  /** Validates `value`; only `success` is read. */
  safeParse(value: unknown): { success: boolean };
}

/**
 * The JSON value in a model's answer: the whole text, or the inside of a single ```json fenced
 * block. Returns `{ ok: false }` when it does not parse.
 * @example
 * extractJson('```json\n{"a":1}\n```') // { ok: true, value: { a: 1 } }
 */
export function extractJson(text: string): { ok: true; value: unknown } | { ok: false } {
  const fenced = /^\s*```(?:json)?\s*\n([\s\S]*?)\n?```\s*$/i.exec(text);
  const body = (fenced?.[1] ?? text).trim();
  if (body === '') return { ok: false };
  try {
    return { ok: true, value: JSON.parse(body) as unknown };
  } catch {
    return { ok: false };
  }
}

/**
 * 1 when the run's final assistant text is JSON (see {@link extractJson}) and, when `schema` is given,
 * passes `schema.safeParse`; else 0.
 * @example
 * validJson(z.object({ city: z.string(), temperature: z.number() }))
 */
export function validJson<S = unknown>(schema?: SafeParser, options: RunReadOptions = {}): RewardFn<S> {
  const reward: RewardFn<S> = (trajectory) => {
    const parsed = extractJson(finalAssistantText(trajectory, options));
    if (!parsed.ok) return 0;
    if (schema !== undefined && !schema.safeParse(parsed.value).success) return 0;
    return 1;
  };
  Object.defineProperty(reward, 'name', { value: 'validJson' });
  return reward;
}
