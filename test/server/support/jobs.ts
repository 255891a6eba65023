/** Helpers to drive training jobs through the API: follow events, wait for the end, build data. */
import type { TestService } from './harness.js';
import { waitFor } from './harness.js';

/** An event as listed by the API. */
export interface ListedEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

/**
 * Follows a job's events as a client does (`after=<last id>`, `limit` per page) until a terminal
 * event; returns every event and how many pages it took.
 */
export async function followEvents(
  server: TestService,
  jobId: string,
  limit = 2,
  timeoutMs = 60_000,
): Promise<{ events: ListedEvent[]; pages: number }> {
  const events: ListedEvent[] = [];
  let pages = 0;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const after = events.length > 0 ? `&after=${events[events.length - 1]?.id}` : '';
    const page = await server.call('GET', `/v1/preview/training-jobs/${jobId}/events?limit=${limit}${after}`);
    if (page.status !== 200) throw new Error(`events answered ${page.status}: ${page.text}`);
    pages += 1;
    events.push(...(page.body.data as ListedEvent[]));
    const last = events[events.length - 1];
    if (
      last !== undefined &&
      (last.type === 'training_ended' || last.type === 'training_failed') &&
      !page.body.has_more
    )
      return { events, pages };
    if (Date.now() > deadline) throw new Error(`No terminal event after ${timeoutMs} ms: ${JSON.stringify(events)}`);
    if (!page.body.has_more) await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Waits until the job is COMPLETED or FAILED and returns its response body. */
export async function waitForJobEnd(server: TestService, jobId: string, timeoutMs = 60_000): Promise<any> {
  const result = await waitFor(
    () => server.call('GET', `/v1/preview/training-jobs/${jobId}`),
    (response) => response.body?.status === 'COMPLETED' || response.body?.status === 'FAILED',
    timeoutMs,
  );
  return result.body;
}

/** Registers a model and returns its response body. */
export async function registerModel(
  server: TestService,
  name: string,
  project = 'server-tests',
  baseModel = 'policyloop/tiny-chat',
): Promise<any> {
  const response = await server.call('POST', '/v1/preview/models', { body: { project, name, base_model: baseModel } });
  if (response.status !== 200) throw new Error(`register answered ${response.status}: ${response.text}`);
  return response.body;
}

/** JSONL text of SFT rows teaching `answer` to `question`. */
export function sftJsonl(rows: readonly { question: string; answer: string }[]): string {
  return rows
    .map((row) =>
      JSON.stringify({
        messages: [
          { role: 'user', content: row.question },
          { role: 'assistant', content: row.answer },
        ],
      }),
    )
    .join('\n');
}

/** A `data:` URL of JSONL text, percent-encoded. */
export function dataUrl(text: string): string {
  return `data:application/jsonl,${encodeURIComponent(text)}`;
}

/**
 * One RL trajectory group sampled from `model` (a base id or trained name): `n` choices with
 * logprobs, rewarded 0, 1, 2, ... so the group is trainable.
 */
export async function sampledGroup(server: TestService, model: string, n = 3): Promise<any> {
  const messages = [{ role: 'user', content: 'say hi' }];
  const completion = await server.call('POST', '/v1/chat/completions', {
    body: { model, messages, n, max_tokens: 6, logprobs: true },
  });
  if (completion.status !== 200) throw new Error(`completion answered ${completion.status}: ${completion.text}`);
  return {
    trajectories: completion.body.choices.map((choice: unknown, index: number) => ({
      messages_and_choices: [...messages, choice],
      reward: index,
    })),
  };
}
