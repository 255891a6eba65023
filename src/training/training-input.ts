/**
 * The keys a group and a trajectory handed to `train()` may have, and the issue that names an
 * unknown one with its likely meaning (a typo such as `messages` would otherwise be kept and
 * trained as nothing). The wire schema stays tolerant of extra keys (the services accept them);
 * this strictness is for what callers hand to `train()` (see `batch.ts`).
 */
import type { z } from 'zod';
import { Trajectory, TrajectoryGroup, TURN_ORDER_KEY } from '../schema/index.js';

// `turn_order`: the recorder's order of a run's turns across its conversations (schema/run-order.ts).
export const TRAJECTORY_KEYS: readonly string[] = [...Object.keys(Trajectory.shape), TURN_ORDER_KEY];
export const GROUP_KEYS: readonly string[] = Object.keys(TrajectoryGroup.shape);

/** Likely meanings of keys that edit distance alone would not find. */
const KNOWN_TYPOS: Readonly<Record<string, string>> = {
  messages: 'messages_and_choices',
  choices: 'messages_and_choices',
  conversation: 'messages_and_choices',
  score: 'reward',
  rewards: 'reward',
  histories: 'additional_histories',
  trajectory: 'trajectories',
  rollouts: 'trajectories',
  exception: 'exceptions',
  errors: 'exceptions',
};

type Issue = z.core.$ZodIssue;

function issue(path: PropertyKey[], message: string, input: unknown): Issue {
  return { code: 'custom', path, message, input } as Issue;
}

/**
 * The known key `key` most likely stands for: a known typo, else the nearest by edit distance
 * (at most a third of the key's length), else null.
 * @example
 * suggestKey('messages', ['messages_and_choices', 'reward']); // 'messages_and_choices'
 * suggestKey('rewrd', ['messages_and_choices', 'reward']); // 'reward'
 */
export function suggestKey(key: string, known: readonly string[]): string | null {
  const typo = KNOWN_TYPOS[key.toLowerCase()];
  if (typo !== undefined && known.includes(typo)) return typo;
  let best: string | null = null;
  let bestDistance = Math.max(1, Math.floor(key.length / 3));
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate);
    if (distance <= bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions). */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/** One issue per key of `value` not in `known`, naming the likely key. */
export function unknownKeyIssues(value: unknown, known: readonly string[], path: PropertyKey[], what: string): Issue[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [];
  const issues: Issue[] = [];
  for (const key of Object.keys(value)) {
    if (known.includes(key)) continue;
    const suggestion = suggestKey(key, known);
    issues.push(
      issue(
        path,
        `Unknown key \`${key}\` in ${what}` +
          (suggestion === null
            ? ` (expected only ${known.map((name) => `\`${name}\``).join(', ')})`
            : `: did you mean \`${suggestion}\`?`),
        value,
      ),
    );
  }
  return issues;
}
