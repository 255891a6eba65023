/** Turns zod issues into short one-line text for error messages (the CLI prints them prettily). */
import type { z } from 'zod';

/**
 * Renders an issue path the way a reader writes it in code: `data[0].metrics.loss`; `(root)` for
 * the value itself.
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_$][\w$]*$/.test(key)) text += text === '' ? key : `.${key}`;
    else text += `[${JSON.stringify(String(key))}]`;
  }
  return text === '' ? '(root)' : text;
}

/** The value found at `path` inside `value`, or `undefined` when the path does not exist. */
export function valueAtPath(value: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/**
 * One line per issue (at most `limit`), each `path: message`, joined with `; `, plus how many
 * more there were.
 */
export function formatIssues(issues: readonly z.core.$ZodIssue[], limit = 3): string {
  const shown = issues.slice(0, limit).map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
  const more = issues.length - shown.length;
  return more > 0 ? `${shown.join('; ')}; and ${more} more` : shown.join('; ');
}
