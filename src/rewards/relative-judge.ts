/**
 * A relative group judge (in the manner of OpenPipe ART's RULER): an LLM reads all trajectories of
 * one group side by side and scores each 0..1 against a rubric. Relative scoring is easier than
 * absolute scoring, and group-relative RL only needs the order and spread within a group.
 */
import { z } from 'zod';
import { abortScope } from '../internal/abort-scope.js';
import { backoffDelay } from '../internal/backoff.js';
import { delay, raceSignal } from '../internal/delay.js';
import { isRetryableError, userAbortError } from '../internal/errors.js';
import { describeValue } from '../internal/describe-value.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { ChatCompletionsClient } from '../schema/chat-client.js';
import { isChoice, messageOf, runItems } from '../schema/index.js';
import type { ChatCompletionMessageParam, Trajectory, TrajectoryGroup } from '../schema/index.js';
import { extractJson } from './json-reward.js';
import { JudgeError } from './reward-errors.js';

/** The rubric used when none is given: generic, since the task is read from the trajectories. */
export const DEFAULT_JUDGE_RUBRIC = [
  '- A trajectory that achieves its goal should always score significantly higher than one that does not.',
  '- Among trajectories that achieve the goal, a more efficient one (fewer detours, fewer wasted calls) scores higher.',
  '- Small differences in quality deserve small differences in score; large differences deserve large ones.',
  '- Partial progress towards the goal may earn partial credit.',
].join('\n');

/** One score of the judge's answer. */
export interface JudgeScore {
  /** Which trajectory, as numbered in the prompt ("1" .. "n"). */
  readonly trajectory_id: string;
  /** The judge's short reason. */
  readonly explanation: string;
  /** Between 0 and 1. */
  readonly score: number;
}

/** Options of {@link relativeJudge}. */
export interface RelativeJudgeOptions {
  /** Any OpenAI-compatible client (`chat.completions.create`). */
  client: ChatCompletionsClient;
  /** The judge model. */
  model: string;
  /**
   * The grading standards, as text.
   * @default DEFAULT_JUDGE_RUBRIC
   */
  rubric?: string | undefined;
  /**
   * Reads scores from an answer that is not the JSON asked for (small judges often ramble):
   * called with the answer text and the number of scores expected, it returns the scores or throws.
   * Its result is checked like the JSON's (count, 0..1).
   */
  parse?: ((content: string, expectedScores: number) => readonly JudgeScore[]) | undefined;
  /**
   * Builds the judge's messages from the conversations (Choices shown as assistant messages) and
   * the rubric, for judges that need a different (or shorter) prompt. The answer is still parsed
   * as `{"scores": [...]}` (or by `parse`).
   * @default buildJudgeMessages
   */
  buildMessages?:
    | ((
        conversations: readonly (readonly ChatCompletionMessageParam[])[],
        rubric: string,
      ) => ChatCompletionMessageParam[])
    | undefined;
  /**
   * Extra request parameters (e.g. `temperature`, `max_tokens`, `response_format`).
   * @default {}
   */
  requestParams?: Readonly<Record<string, unknown>> | undefined;
  /**
   * Limit of each judge request, in milliseconds; then the attempt fails with a `JudgeError` of
   * reason `'timeout'` (retried like a failed request), even when the client ignores its signal.
   * @default 120000
   */
  timeout?: number | undefined;
  /**
   * Retries of a failed judge request after its first attempt (timeouts, connection errors,
   * 408/409/429/5xx; not answers that cannot be used). The judge retries on its own and asks the
   * client for none (`maxRetries: 0`), so that retries do not multiply.
   * @default 2
   */
  maxRetries?: number | undefined;
  /**
   * Wait before the first retry, in milliseconds; doubles with each further one (capped at 8 s,
   * or at `retryDelay` when longer), less up to 25 % jitter.
   * @default 1000
   */
  retryDelay?: number | undefined;
  /**
   * Name of the judge: its score is recorded as the metric `<name>_score` and its explanation is
   * logged as `<name>: ...`.
   * @default 'judge'
   */
  name?: string | undefined;
}

/** What a judge is called with besides the group. */
export interface JudgeCallOptions {
  /**
   * Aborts the judge request and any wait between retries: rejects with `APIUserAbortError`,
   * whose `cause` is the signal's reason.
   */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Scores a group in place (and returns it): each trajectory's previous reward goes to
 * `metrics.independent_reward`, the judge's score becomes `reward` and `metrics.<name>_score`, the
 * explanation is appended to `logs`. Usable directly as a gather's `scoreGroup`.
 */
export type GroupJudge = (group: TrajectoryGroup, options?: JudgeCallOptions) => Promise<TrajectoryGroup>;

/** The check of {@link RelativeJudgeOptions}, made when the judge is made, with the defaults. */
const RelativeJudgeOptionsSchema = optionsSchema<RelativeJudgeOptions>()({
  client: option.like<ChatCompletionsClient>(
    (client) => typeof client?.chat?.completions?.create === 'function',
    'a client with `chat.completions.create` (e.g. `new OpenAI()`)',
  ),
  model: option.nonEmptyString(),
  rubric: option.string().default(DEFAULT_JUDGE_RUBRIC),
  parse: option.function<(content: string, expectedScores: number) => readonly JudgeScore[]>().optional(),
  buildMessages: option.function<typeof buildJudgeMessages>().optional(),
  requestParams: option
    .like<Readonly<Record<string, unknown>>>(
      (params) => typeof params === 'object' && params !== null && !Array.isArray(params),
      'an object of request parameters',
    )
    .default({}),
  timeout: option.timeout({ allowInfinity: true }).default(120_000),
  maxRetries: option.retryCount().default(2),
  retryDelay: option.retryDelay().default(1000),
  name: option.nonEmptyString().default('judge'),
});

/** A judge's options as checked, defaults applied, with a call's `signal`. */
type JudgeSettings = z.output<typeof RelativeJudgeOptionsSchema> & JudgeCallOptions;

/**
 * The check of {@link JudgeCallOptions}. Other keys pass: a gather calls its scorer with its whole
 * context (`{ scenario, groupIndex, signal }`).
 */
const JudgeCallOptionsSchema = option
  .options<JudgeCallOptions>()
  .pipe(z.looseObject({ signal: option.signal().optional() }));

const JudgeAnswer = z.object({
  scores: z.array(
    z.looseObject({
      trajectory_id: z.union([z.string(), z.number()]).transform(String),
      explanation: z.string().default(''),
      score: z.number(),
    }),
  ),
});

/**
 * The default judge prompt: a system message with the task, the rubric and the answer format, and
 * a user message with the common prefix of the conversations once (`<context>`), then each
 * conversation's remainder (`<trajectory id="n">`), as JSON.
 */
export function buildJudgeMessages(
  conversations: readonly (readonly ChatCompletionMessageParam[])[],
  rubric: string,
): ChatCompletionMessageParam[] {
  const serialized = conversations.map((messages) => messages.map((message) => JSON.stringify(message)));
  const first = serialized[0] ?? [];
  let prefix = 0;
  while (prefix < first.length && serialized.every((messages) => messages[prefix] === first[prefix])) prefix += 1;
  let user = '';
  if (prefix > 0) user += `<context>\n[${first.slice(0, prefix).join(',')}]\n</context>\n\n`;
  user += 'Trajectories:\n\n';
  user += serialized
    .map((messages, index) => `<trajectory id="${index + 1}">\n[${messages.slice(prefix).join(',')}]\n</trajectory>`)
    .join('\n\n');
  const system = [
    'All of the trajectories below were given the same goal. Consider each of them and give each a score between 0 and 1.',
    "Use your best judgement of the agent's goal.",
    '',
    'Grading standards:',
    rubric,
    '',
    'Answer with only a JSON object, no other text:',
    '{"scores": [{"trajectory_id": "1", "explanation": "<one sentence>", "score": <number 0..1>}, ...]}',
    `with one entry for each of the ${conversations.length} trajectories, in order.`,
  ].join('\n');
  return [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
}

function answerText(response: unknown): string | undefined {
  const choices = (response as { choices?: unknown } | null)?.choices;
  if (!Array.isArray(choices)) return undefined;
  const content = (choices[0] as { message?: { content?: unknown } } | undefined)?.message?.content;
  return typeof content === 'string' ? content : undefined;
}

function parseDefault(content: string): readonly JudgeScore[] | undefined {
  let parsed = extractJson(content);
  if (!parsed.ok) {
    // Judges often wrap the object in prose: try the outermost braces.
    const start = content.indexOf('{');
    const end = content.lastIndexOf('}');
    if (start >= 0 && end > start) parsed = extractJson(content.slice(start, end + 1));
  }
  if (!parsed.ok) return undefined;
  const answer = JudgeAnswer.safeParse(parsed.value);
  return answer.success ? answer.data.scores : undefined;
}

/** Puts scores in trajectory order: by id when the ids are exactly 1..n, else by position. */
function ordered(scores: readonly JudgeScore[]): readonly JudgeScore[] {
  const ids = scores.map((score) => Number(score.trajectory_id));
  const byId = [...ids].sort((a, b) => a - b).every((id, index) => id === index + 1);
  return byId ? [...scores].sort((a, b) => Number(a.trajectory_id) - Number(b.trajectory_id)) : scores;
}

/** One judge request under its own timeout: the answer, or a `JudgeError` (`APIUserAbortError` on abort). */
async function requestOnce(
  options: JudgeSettings,
  messages: ChatCompletionMessageParam[],
  expected: number,
): Promise<unknown> {
  const { timeout } = options;
  const scope = abortScope({
    signal: options.signal,
    timeout,
    what: 'The judge request',
    onTimeout: (ms) =>
      new JudgeError(`The judge request to model \`${options.model}\` did not answer within ${ms} ms`, {
        reason: 'timeout',
        expectedScores: expected,
        retryable: true,
      }),
  });
  try {
    return await raceSignal(
      Promise.resolve(
        options.client.chat.completions.create(
          { ...options.requestParams, model: options.model, messages },
          { signal: scope.signal, maxRetries: 0, ...(Number.isFinite(timeout) ? { timeout } : {}) },
        ),
      ),
      scope.signal,
    );
  } catch (error) {
    if (scope.signal.aborted) throw scope.error();
    const message = error instanceof Error ? error.message : String(error);
    throw new JudgeError(`The judge request to model \`${options.model}\` failed: ${message}`, {
      reason: 'request',
      expectedScores: expected,
      cause: error,
      retryable: isRetryableError(error),
    });
  } finally {
    scope.dispose();
  }
}

/**
 * Asks the judge once to score conversations relative to each other and returns one checked score
 * per conversation, in order. Identical conversations are sent once and share the score.
 * Throws {@link JudgeError} when the request fails or the answer cannot be used.
 */
export async function judgeConversations(
  conversations: readonly (readonly ChatCompletionMessageParam[])[],
  options: JudgeSettings,
): Promise<JudgeScore[]> {
  if (conversations.length === 0) return [];
  const keys = conversations.map((messages) => JSON.stringify(messages));
  const identical = keys.every((key) => key === keys[0]);
  const sent = identical ? conversations.slice(0, 1) : conversations;
  const expected = sent.length;
  const messages = (options.buildMessages ?? buildJudgeMessages)(sent, options.rubric);
  const { signal, maxRetries, retryDelay } = options;
  let response: unknown;
  for (let attempt = 1; ; attempt += 1) {
    if (signal?.aborted) throw userAbortError(signal, 'The judge request');
    try {
      response = await requestOnce(options, messages, expected);
      break;
    } catch (error) {
      if (!(error instanceof JudgeError) || !error.retryable || attempt > maxRetries) {
        if (error instanceof JudgeError && error.retryable && attempt > 1) {
          error.message += ` (gave up after ${attempt} attempts)`;
        }
        throw error;
      }
    }
    try {
      await delay(backoffDelay(attempt, retryDelay), signal);
    } catch {
      throw userAbortError(signal, 'The judge request (while waiting to retry)');
    }
  }
  const content = answerText(response);
  if (content === undefined) {
    throw new JudgeError(`Expected the judge's answer to have text content, got ${describeValue(response, 200)}`, {
      reason: 'parse',
      expectedScores: expected,
    });
  }
  let scores = parseDefault(content);
  if (scores === undefined && options.parse !== undefined) {
    try {
      scores = options.parse(content, expected);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new JudgeError(
        `The judge's answer was not the JSON asked for and the \`parse\` fallback failed (${reason}); got ${describeValue(content, 200)}`,
        { reason: 'parse', raw: content, expectedScores: expected, cause: error },
      );
    }
  }
  if (scores === undefined) {
    throw new JudgeError(
      `Expected the judge to answer {"scores": [{"trajectory_id", "explanation", "score"}, ...]}, got ${describeValue(content, 200)}`,
      { reason: 'parse', raw: content, expectedScores: expected },
    );
  }
  if (scores.length !== expected) {
    throw new JudgeError(`Expected ${expected} scores from the judge, got ${scores.length}`, {
      reason: 'count',
      raw: content,
      expectedScores: expected,
    });
  }
  for (const score of scores) {
    if (typeof score.score !== 'number' || !(score.score >= 0 && score.score <= 1)) {
      throw new JudgeError(
        `Expected judge scores between 0 and 1, got ${String(score.score)} for trajectory ${score.trajectory_id}`,
        {
          reason: 'range',
          raw: content,
          expectedScores: expected,
        },
      );
    }
  }
  const inOrder = ordered(scores);
  if (identical) {
    const only = inOrder[0] as JudgeScore;
    return conversations.map((_conversation, index) => ({ ...only, trajectory_id: String(index + 1) }));
  }
  return [...inOrder];
}

/**
 * The run as the judge reads it: every conversation's turns in the order they happened, a context
 * message that a sub-agent's conversation repeats (the user's question, an earlier turn) shown once.
 */
function conversationOf(trajectory: Trajectory): ChatCompletionMessageParam[] {
  const seen = new Set<string>();
  const conversation: ChatCompletionMessageParam[] = [];
  for (const { item } of runItems(trajectory)) {
    const message = messageOf(item);
    const key = JSON.stringify(message);
    if (!isChoice(item) && seen.has(key)) continue;
    seen.add(key);
    conversation.push(message);
  }
  return conversation;
}

/**
 * A relative judge for trajectory groups (see {@link GroupJudge}). The judge reads each
 * trajectory's whole run: the main conversation and the sub-agents' (`additional_histories`), in
 * the order the turns happened, with context a sub-agent repeats shown once. A failure throws
 * {@link JudgeError} and leaves the group unchanged.
 * @example
 * const judge = relativeJudge({ client: new OpenAI(), model: 'gpt-4.1-mini', rubric: 'Correct answers first.' });
 * const groups = await gatherTrajectoryGroups(scenarios, rollout, { groupSize: 4, scoreGroup: judge });
 */
export function relativeJudge(options: RelativeJudgeOptions): GroupJudge {
  const settings = parseOptions(RelativeJudgeOptionsSchema, options);
  const { name } = settings;
  return async (group, call) => {
    const { signal } = parseOptions(JudgeCallOptionsSchema, call);
    if (group.trajectories.length === 0) return group;
    const scores = await judgeConversations(group.trajectories.map(conversationOf), { ...settings, signal });
    group.trajectories.forEach((trajectory, index) => {
      const score = scores[index] as JudgeScore;
      trajectory.metrics['independent_reward'] = trajectory.reward;
      trajectory.metrics[`${name}_score`] = score.score;
      trajectory.reward = score.score;
      trajectory.logs.push(`${name}: ${score.explanation}`);
    });
    return group;
  };
}
