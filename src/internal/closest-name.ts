/** The known name a misspelt one most likely meant, for "did you mean" hints. */

/**
 * The candidate closest to `name`, or `undefined` when none is close: the fewest single-letter
 * edits (insert, delete, replace, swap two neighbours; case ignored), at most a third of the
 * shorter name (at least 1, fewer than its letters); failing that, a candidate that holds `name` whole or is held in it
 * (`retries` → `maxRetries`), for names of 4 letters or more. The first of equally close wins.
 * @example
 * closestName('maxStep', ['maxSteps', 'groupSize']); // 'maxSteps'
 * closestName('colour', ['groupSize']); // undefined
 */
export function closestName(name: string, candidates: Iterable<string>): string | undefined {
  const wanted = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  let containing: string | undefined;
  for (const candidate of candidates) {
    if (candidate === name) continue;
    const known = candidate.toLowerCase();
    const limit = Math.max(1, Math.floor(Math.min(wanted.length, known.length) / 3));
    const distance = editDistance(wanted, known, limit);
    // Replacing every letter of a short name is no resemblance.
    if (distance <= limit && distance < Math.min(wanted.length, known.length) && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
    if (containing === undefined && wanted.length >= 4 && (known.includes(wanted) || wanted.includes(known))) {
      containing = candidate;
    }
  }
  return best ?? containing;
}

/**
 * The optimal-string-alignment distance between `a` and `b` (Levenshtein plus swaps of two
 * neighbouring letters); anything above `limit` comes back as `limit + 1`.
 */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  // Three rows of the table: two rows back (for swaps), the previous one and the current one.
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    let rowMinimum = i;
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, (before[j - 2] ?? 0) + 1);
      }
      current[j] = value;
      rowMinimum = Math.min(rowMinimum, value);
    }
    if (rowMinimum > limit) return limit + 1;
    before = previous;
    previous = current;
  }
  return Math.min(previous[b.length] ?? 0, limit + 1);
}
