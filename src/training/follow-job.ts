/**
 * Following a training job: poll its events (`?after=<last id>`, following `has_more`) until the
 * terminal event, reporting progress on the way. Each poll is a long poll (`wait_ms`): the local
 * service answers at the job's next event, so the wait ends as the job does. A service that
 * answers at once instead is polled with a back-off (50 ms, doubling up to the poll interval,
 * short again after each event). Every wait is abortable and bounded by a timeout.
 */
import type { TrainingClient } from '../client/index.js';
import { abortScope } from '../internal/abort-scope.js';
import { delay } from '../internal/delay.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import type { ReceivedTrainingJobEvent, TrainingJobResponse } from '../schema/index.js';
import { TrainingJobFailedError, TrainingTimeoutError } from './errors.js';

/**
 * Default longest time between event polls (the cap of the back-off), in milliseconds.
 * @default 1000
 */
export const DEFAULT_POLL_INTERVAL_MS = 1_000;

/**
 * The first wait after a poll that brought an event (or the first poll), in milliseconds; each
 * quiet poll doubles it, up to the poll interval.
 * @default 50
 */
const FIRST_POLL_DELAY_MS = 50;

/** How long each poll asks the service to hold an empty answer for the next event (`wait_ms`). */
const LONG_POLL_MS = 10_000;

/**
 * Default overall timeout of following a job, in milliseconds (one hour).
 * @default 3_600_000
 */
export const DEFAULT_JOB_TIMEOUT_MS = 3_600_000;

/** Progress of a job, reported after every event. */
export interface JobProgress {
  /** The job's id. */
  readonly jobId: string;
  /** The event just received. */
  readonly event: ReceivedTrainingJobEvent;
  /** Gradient steps done so far. */
  readonly gradientSteps: number;
  /** Gradient steps the job announced (`training_started.num_sequences`), or null before it. */
  readonly totalSteps: number | null;
  /** `gradientSteps / totalSteps` clamped to 0..1, or null when the total is unknown. */
  readonly fraction: number | null;
  /** The metrics of the latest `gradient_step` event (numbers only). */
  readonly metrics: Readonly<Record<string, number>>;
}

/** Options of {@link followTrainingJob}. */
export interface FollowJobOptions {
  /**
   * Stops following (the job itself keeps running on the service): rejects with `APIUserAbortError`,
   * whose `cause` is the signal's reason, whether the abort lands during a request or a poll wait.
   */
  signal?: AbortSignal | undefined;
  /**
   * Overall time allowed, in milliseconds; then {@link TrainingTimeoutError}. `Infinity` for none.
   * @default 3_600_000
   */
  timeout?: number | undefined;
  /**
   * Longest time between polls of a service that does not long-poll, in milliseconds: the wait
   * starts at 50 ms after each event and doubles while no event comes, up to this. (The local
   * service long-polls: it answers at the job's next event, so the wait ends as the job does,
   * with a poll per event or per 10 s.)
   * @default 1000
   */
  pollInterval?: number | undefined;
  /** Called after every event. */
  onProgress?: ((progress: JobProgress) => void) | undefined;
}

/**
 * The checks of {@link FollowJobOptions}: one declaration for `followTrainingJob` and for the
 * model's training calls, whose request options are these four.
 */
export const followJobShape = {
  signal: option.signal().optional(),
  timeout: option.timeout({ allowInfinity: true }).optional(),
  pollInterval: option.timeout().optional(),
  onProgress: option.function<(progress: JobProgress) => void>().optional(),
};

/** The check of {@link FollowJobOptions}: no other key. */
const FollowJobOptionsSchema = optionsSchema<FollowJobOptions>()(followJobShape);

/** How a followed job ended. */
export interface FollowedJob {
  /** Every event of the job, in order. */
  readonly events: readonly ReceivedTrainingJobEvent[];
  /** Each metric of the `gradient_step` events, averaged over the steps. */
  readonly metrics: Record<string, number>;
}

/**
 * Polls the events of job `jobId` until `training_ended` (resolves) or `training_failed`
 * (rejects with {@link TrainingJobFailedError} carrying the job and the service's message).
 * Rejects with {@link TrainingTimeoutError} after `timeout`, and with `APIUserAbortError` (cause:
 * the signal's reason) when `signal` aborts.
 * @example
 * const job = await client.jobs.createRL({ model_id, trajectory_groups });
 * const { metrics } = await followTrainingJob(client, job.id, { onProgress: (p) => console.log(p.fraction) });
 */
export async function followTrainingJob(
  client: TrainingClient,
  jobId: string,
  followOptions?: FollowJobOptions,
): Promise<FollowedJob> {
  const options = parseOptions(FollowJobOptionsSchema, followOptions);
  const timeout = options.timeout ?? DEFAULT_JOB_TIMEOUT_MS;
  const pollInterval = options.pollInterval ?? DEFAULT_POLL_INTERVAL_MS;
  const firstDelay = Math.min(FIRST_POLL_DELAY_MS, pollInterval);
  let wait = firstDelay;
  // A timeout surfaces as TrainingTimeoutError and the caller's abort as APIUserAbortError, never
  // the other way round, whether it lands during a request or a wait between polls.
  const scope = abortScope({
    signal: options.signal,
    timeout,
    what: `Following training job ${jobId}`,
    onTimeout: (ms) => new TrainingTimeoutError(jobId, ms),
  });
  const signal = scope.signal;

  const tally = new JobTally(jobId);
  let after: string | undefined;
  try {
    for (;;) {
      const sentAt = Date.now();
      const page = await client.jobs.events(
        jobId,
        { after, limit: 100, wait_ms: LONG_POLL_MS },
        { signal, timeout: LONG_POLL_MS + 30_000 },
      );
      // An empty answer that took most of the wait: the service held it (a long poll), so ask again at once.
      const held = page.data.length === 0 && Date.now() - sentAt >= LONG_POLL_MS / 2;
      for (const event of page.data) {
        after = event.id;
        options.onProgress?.(tally.record(event));
        if (event.type === 'training_ended') return tally.result();
        if (event.type === 'training_failed') throw await jobFailure(client, jobId, event, signal);
      }
      // Short again after an event: the next one (often the terminal event) tends to follow soon.
      if (page.data.length > 0 || held) wait = firstDelay;
      // After events, ask again at once: a long-polling service holds the request until the next
      // event, and one that does not answers an empty page, which waits. An empty page waits (also
      // one that claims more: a confused service), rather than spin.
      if (page.data.length === 0 && !held) {
        await delay(wait, signal);
        wait = Math.min(wait * 2, pollInterval);
      }
    }
  } catch (error) {
    if (scope.signal.aborted && !(error instanceof TrainingJobFailedError)) throw scope.error();
    throw error;
  } finally {
    scope.dispose();
  }
}

/**
 * Checks the options of following a job (`signal`, `timeout`, `pollInterval`, `onProgress`) in an
 * options object that may hold more (a training call's): a bad one throws `InvalidArgumentError`
 * before any request. The other keys are the caller's to check.
 */
export function checkFollowJobOptions(options: FollowJobOptions): void {
  parseOptions(FollowJobOptionsSchema, options);
}

/** The events of a followed job so far: progress after each, and the averaged metrics at the end. */
class JobTally {
  private readonly events: ReceivedTrainingJobEvent[] = [];
  private readonly sums = new Map<string, { sum: number; count: number }>();
  private totalSteps: number | null = null;
  private gradientSteps = 0;
  private latest: Record<string, number> = {};

  constructor(private readonly jobId: string) {}

  /** Counts `event` in and says where the job is. */
  record(event: ReceivedTrainingJobEvent): JobProgress {
    this.events.push(event);
    if (event.type === 'training_started') {
      const steps = event.data['num_sequences'];
      if (typeof steps === 'number') this.totalSteps = steps;
    } else if (event.type === 'gradient_step') {
      this.gradientSteps += 1;
      this.latest = numbersOf(event.data);
      for (const [name, value] of Object.entries(this.latest)) {
        const entry = this.sums.get(name) ?? { sum: 0, count: 0 };
        entry.sum += value;
        entry.count += 1;
        this.sums.set(name, entry);
      }
    }
    const { jobId, gradientSteps, totalSteps } = this;
    const fraction = totalSteps === null || totalSteps <= 0 ? null : Math.min(1, gradientSteps / totalSteps);
    return { jobId, event, gradientSteps, totalSteps, fraction, metrics: this.latest };
  }

  /** Every event, and each `gradient_step` metric averaged over the steps. */
  result(): FollowedJob {
    const metrics: Record<string, number> = {};
    for (const [name, { sum, count }] of this.sums) metrics[name] = sum / count;
    return { events: this.events, metrics };
  }
}

/** The error of a `training_failed` event: the service's message, else the job's. */
async function jobFailure(
  client: TrainingClient,
  jobId: string,
  event: ReceivedTrainingJobEvent,
  signal: AbortSignal,
): Promise<TrainingJobFailedError> {
  const message = event.data['error_message'];
  const job = await retrieveQuietly(client, jobId, signal);
  return new TrainingJobFailedError(
    job,
    event,
    typeof message === 'string' && message !== '' ? message : (job.error_message ?? 'no message from the service'),
  );
}

/** The job as the service reports it; `{id}` alone when it cannot be read (the failure wins). */
async function retrieveQuietly(
  client: TrainingClient,
  jobId: string,
  signal: AbortSignal,
): Promise<TrainingJobResponse> {
  try {
    return await client.jobs.retrieve(jobId, { signal });
  } catch {
    return { id: jobId };
  }
}

function numbersOf(data: Record<string, unknown>): Record<string, number> {
  const numbers: Record<string, number> = {};
  for (const [name, value] of Object.entries(data)) {
    if (typeof value === 'number' && Number.isFinite(value)) numbers[name] = value;
  }
  return numbers;
}
