/**
 * What the framework integration tests share: the real local service (through `LocalBackend`),
 * one fresh `policyloop/small-chat` model, and the checks every framework must pass (one recorded Choice with logprobs per HTTP
 * call, no mixing between concurrent rollouts, one RL step on the recorded groups).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import {
  currentTrajectory,
  isChoice,
  LocalBackend,
  TrainableModel,
  type TrajectoryGroupInput,
  type TrajectoryInput,
} from 'policyloop';
import type { Choice } from 'policyloop/schema';

/** Short on purpose: the local model reads at most 512 tokens (bytes), tool schemas included. */
export const SYSTEM = 'Be brief.';
/** The follow-up turn every rollout sends after the model's first answer. */
export const FOLLOW_UP = 'And tomorrow?';
/** The most tokens a reply may take (the random model would otherwise fill the context). */
export const MAX_TOKENS = 12;
export const CITIES = ['Oslo', 'Lima', 'Rome', 'Kyiv', 'Pune', 'Baku', 'Doha', 'Riga'];
export const question = (city: string): string => `Weather in ${city}?`;
export const weatherOf = (city: string): string => `${city}: 9C`;

/** A started backend with a model that calls the tool, and how to stop it. */
export interface ToolModel {
  readonly backend: LocalBackend;
  readonly model: TrainableModel;
  close(): Promise<void>;
}

/**
 * Starts the local service and registers a fresh `small-chat` model (512 tokens: a framework's
 * system prompt, tool schema and two turns fit).
 */
export async function startToolModel(): Promise<ToolModel> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-integrations-'));
  const backend = await LocalBackend.start({ dataDir });
  const model = new TrainableModel({ project: 'integrations', name: 'weather', baseModel: 'policyloop/small-chat' });
  await model.register(backend);
  return {
    backend,
    model,
    async close() {
      await model.close();
      await backend.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts the tool model before a test file's tests and closes it after them: read `.current`
 * inside the tests.
 */
export function useToolModel(): { readonly current: ToolModel } {
  const holder: { current?: ToolModel } = {};
  beforeAll(async () => {
    holder.current = await startToolModel();
  }, 120_000);
  afterAll(async () => {
    await holder.current?.close();
  });
  return holder as { readonly current: ToolModel };
}

/**
 * Wraps `fetch` to count the chat-completions calls each rollout makes (in its trajectory's
 * metrics, found through the rollout scope) and every host it contacts.
 */
export function countingFetch(hosts: Set<string>, inner: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    hosts.add(url.hostname);
    if (url.pathname.endsWith('/chat/completions')) {
      const metrics = currentTrajectory()?.metrics;
      if (metrics !== undefined) {
        metrics['http_calls'] = Number(metrics['http_calls'] ?? 0) + 1;
        const streamed =
          typeof init?.body === 'string' && (JSON.parse(init.body) as { stream?: unknown }).stream === true;
        if (streamed) metrics['streamed_calls'] = Number(metrics['streamed_calls'] ?? 0) + 1;
      }
    }
    return inner(input, init);
  };
}

/** Every Choice of a trajectory, sub-agent histories included. */
export function choicesIn(trajectory: TrajectoryInput): Choice[] {
  return [
    ...(trajectory.messages_and_choices ?? []),
    ...(trajectory.additional_histories ?? []).flatMap((history) => history.messages_and_choices),
  ].filter(isChoice);
}

/**
 * The checks of "done": every HTTP call recorded exactly once as a Choice with logprobs, all in
 * the main conversation (the recorder recognised the second call, with the first answer as the
 * framework re-serialized it, as a continuation), each rollout holding its own city only, and
 * every rollout made at least `calls` calls, all streamed (SSE) or none.
 */
export function expectRecorded(
  groups: readonly TrajectoryGroupInput[],
  cities: readonly string[],
  streaming: boolean,
  calls = 2,
): void {
  for (const [index, group] of groups.entries()) {
    const city = cities[index] as string;
    expect(group.exceptions ?? []).toEqual([]);
    for (const trajectory of group.trajectories) {
      const choices = choicesIn(trajectory);
      expect(Number(trajectory.metrics?.['http_calls'])).toBeGreaterThanOrEqual(calls);
      expect(choices.length).toBe(trajectory.metrics?.['http_calls']);
      expect(trajectory.metrics?.['streamed_calls'] ?? 0).toBe(streaming ? choices.length : 0);
      for (const choice of choices) expect(choice.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
      expect(trajectory.additional_histories ?? []).toEqual([]);
      const text = JSON.stringify((trajectory.messages_and_choices ?? []).filter((item) => !isChoice(item)));
      expect(text).toContain(question(city));
      for (const other of CITIES) if (other !== city) expect(text).not.toContain(question(other));
    }
  }
}

/**
 * The reward: the mean logprob of the sampled tokens (any number that differs between the
 * trajectories of a group gives the RL step a signal; the fresh model's replies all run to the
 * token limit, so their lengths do not differ).
 */
export function meanLogprob(trajectory: TrajectoryInput): number {
  const logprobs = choicesIn(trajectory).flatMap((choice) =>
    (choice.logprobs?.content ?? []).map((token) => token.logprob),
  );
  return logprobs.reduce((sum, value) => sum + value, 0) / Math.max(1, logprobs.length);
}
