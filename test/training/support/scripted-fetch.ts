/**
 * A scripted `fetch` for the training unit tests: answers the log endpoint from a script of
 * statuses and records every body the "service" acknowledged, so tests can check that nothing
 * is lost and nothing arrives twice.
 */

/** One log request as sent. */
export interface LogCall {
  readonly split: string;
  readonly groupIds: string[];
  readonly status: number | 'connection-error' | 'pending';
}

/** A group with a recognisable id in its metadata. */
export function group(id: string, rewards: readonly number[] = [0, 1]) {
  return { trajectories: rewards.map((reward) => ({ reward })), metadata: { id } };
}

/**
 * `next()` decides each log request's fate: a status code, `'connection-error'` (fetch throws), or
 * `'hold'` (the request waits until `release()`).
 */
export function scriptedLogFetch(next: (call: number) => number | 'connection-error' | 'hold' = () => 200) {
  const calls: LogCall[] = [];
  const acknowledged: string[] = [];
  const held: Array<() => void> = [];
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input));
    if (!url.pathname.endsWith('/log')) throw new Error(`scriptedLogFetch: unexpected ${init?.method} ${url.pathname}`);
    const body = JSON.parse(String(init?.body)) as {
      split: string;
      trajectory_groups: Array<{ metadata?: { id?: string } }>;
    };
    const groupIds = body.trajectory_groups.map((entry) => String(entry.metadata?.id));
    let fate = next(calls.length);
    if (fate === 'hold') {
      calls.push({ split: body.split, groupIds, status: 'pending' });
      await new Promise<void>((resolve, reject) => {
        held.push(resolve);
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
      });
      fate = 200;
    } else {
      calls.push({ split: body.split, groupIds, status: fate });
    }
    if (fate === 'connection-error') throw new TypeError('fetch failed');
    if (fate === 200) acknowledged.push(...groupIds);
    return new Response(JSON.stringify(fate === 200 ? { ok: true } : { detail: `scripted ${fate}` }), {
      status: fate,
      headers: { 'content-type': 'application/json' },
    });
  };
  return {
    fetch: fetch as typeof globalThis.fetch,
    calls,
    acknowledged,
    /** Lets every held request answer 200. */
    release: () => {
      for (const resolve of held.splice(0)) resolve();
    },
  };
}
