/** Errors of the training layer: failed jobs, missing logprobs, timeouts, undeliverable logs. */
import { PolicyloopError } from '../internal/errors.js';
import type { ReceivedTrainingJobEvent, TrainingJobResponse, TrajectoryGroupInput } from '../schema/index.js';

/**
 * A training job ended with `training_failed` (or in status `FAILED`). Carries the job as the
 * service last reported it, the terminal event, and the service's own message.
 * @example
 * try {
 *   await model.train(groups);
 * } catch (error) {
 *   if (error instanceof TrainingJobFailedError) console.error(error.job.id, error.serviceMessage);
 * }
 */
export class TrainingJobFailedError extends PolicyloopError {
  /** The job, as `GET /v1/preview/training-jobs/{id}` returned it after the failure. */
  readonly job: TrainingJobResponse;
  /** The terminal `training_failed` event, or null when the failure was seen in the job status. */
  readonly event: ReceivedTrainingJobEvent | null;
  /** The service's explanation (`error_message`). */
  readonly serviceMessage: string;

  constructor(job: TrainingJobResponse, event: ReceivedTrainingJobEvent | null, serviceMessage: string) {
    super(`Training job ${job.id} failed: ${serviceMessage}`);
    this.job = job;
    this.event = event;
    this.serviceMessage = serviceMessage;
  }
}

/**
 * A training-job request failed in a way that leaves open whether the service created the job (the
 * connection broke, the request timed out, or a 5xx came back), and the service is not known to
 * honour `Idempotency-Key`, so it was not sent again: a blind retry could start a second job.
 * Look at the model's jobs before trying again; `idempotencyKey` is the key the request carried.
 * @example
 * try {
 *   await model.train(groups);
 * } catch (error) {
 *   if (error instanceof TrainingJobUncertainError) console.error(error.message, error.cause);
 * }
 */
export class TrainingJobUncertainError extends PolicyloopError {
  /** `rl` or `sft`. */
  readonly kind: 'rl' | 'sft';
  /** The `Idempotency-Key` the request carried. */
  readonly idempotencyKey: string;

  constructor(kind: 'rl' | 'sft', idempotencyKey: string, cause: unknown) {
    super(
      `The ${kind === 'rl' ? 'training' : 'SFT'} job request may or may not have reached the service (${cause instanceof Error ? cause.message : String(cause)}); it was not sent again because this service is not known to honour Idempotency-Key and a retry could start a second job. Check the model's jobs before training again.`,
      { cause },
    );
    this.kind = kind;
    this.idempotencyKey = idempotencyKey;
  }
}

/** Where in the training data a Choice without logprobs sits. */
export interface ChoiceLocation {
  /** Index of the group in the list passed to `train`. */
  readonly groupIndex: number;
  /** Index of the trajectory in its group. */
  readonly trajectoryIndex: number;
  /** Index of the sub-agent history in `additional_histories`, or null for the main conversation. */
  readonly historyIndex: number | null;
  /** Index of the Choice in `messages_and_choices`. */
  readonly itemIndex: number;
}

/**
 * A trainable `Choice` has no token logprobs, so an RL step cannot compute its importance ratio.
 * Thrown before anything is uploaded. Request completions with `logprobs: true` (the model's
 * `openai()` client does by default) or pass `allowTrainingWithoutLogprobs: true`.
 */
export class MissingLogprobsError extends PolicyloopError {
  /** Where the first offending Choice is. */
  readonly location: ChoiceLocation;
  /** How many Choices in the data lack logprobs in all. */
  readonly count: number;

  constructor(location: ChoiceLocation, count: number) {
    const where =
      location.historyIndex === null
        ? `messages_and_choices[${location.itemIndex}]`
        : `additional_histories[${location.historyIndex}].messages_and_choices[${location.itemIndex}]`;
    super(
      `Expected every Choice to carry token logprobs, but trajectory ${location.trajectoryIndex} of group ` +
        `${location.groupIndex} has none at ${where}` +
        (count > 1 ? ` (${count} Choices lack them in all)` : '') +
        '. Request completions with `logprobs: true` (model.openai() does by default), ' +
        "or pass `allowTrainingWithoutLogprobs: true` to let the service use the current policy's logprobs.",
    );
    this.location = location;
    this.count = count;
  }
}

/**
 * Following a training job took longer than the `timeout` given. The job may still be running on
 * the service; its id is kept so it can be looked up later.
 */
export class TrainingTimeoutError extends PolicyloopError {
  /** Id of the job that was being followed. */
  readonly jobId: string;
  /** The timeout that elapsed, in milliseconds. */
  readonly timeoutMs: number;

  constructor(jobId: string, timeoutMs: number) {
    super(
      `Training job ${jobId} did not finish within ${timeoutMs} ms; it may still be running on the service ` +
        '(raise `timeout` to wait longer).',
      { retryable: true },
    );
    this.jobId = jobId;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * Log batches could not be delivered and could not be written to the spool file either, so the
 * groups exist only in this error. Nothing else is lost silently: a batch that is spooled is
 * reported through the batcher's `batch:spooled` event instead.
 */
export class LogDeliveryError extends PolicyloopError {
  /** The split of the batch. */
  readonly split: string;
  /** The groups that could be neither sent nor spooled (the only copy left). */
  readonly trajectoryGroups: readonly TrajectoryGroupInput[];
  /** Path of the spool file that could not be written. */
  readonly spoolPath: string;

  constructor(split: string, trajectoryGroups: readonly TrajectoryGroupInput[], spoolPath: string, cause: unknown) {
    super(
      `Could not deliver ${trajectoryGroups.length} ${split} trajectory group(s) to the log endpoint nor write them to ` +
        `the spool file ${spoolPath}: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.split = split;
    this.trajectoryGroups = trajectoryGroups;
    this.spoolPath = spoolPath;
  }
}

/**
 * A log flush (or close) took longer than its `timeout`. A flush keeps delivering in the
 * background; a close has written what was not delivered to the spool file (nothing is lost).
 */
export class LogFlushTimeoutError extends PolicyloopError {
  /** The timeout that elapsed, in milliseconds. */
  readonly timeoutMs: number;

  /** @param timeoutMs The timeout that elapsed; `what` names the call in the message. */
  constructor(timeoutMs: number, what = 'flush') {
    super(
      `The log ${what} did not finish within its timeout of ${timeoutMs} ms` +
        (what === 'close' ? '; what was not delivered is in the spool file.' : '; delivery goes on in the background.'),
      { retryable: true },
    );
    this.timeoutMs = timeoutMs;
  }
}

/**
 * An RL run stopped because too many groups in a row had no learning signal: every trajectory of
 * each got the same reward (no gradient), or too few of its rollouts finished to train
 * (`minGroupSize`). The policy has collapsed, the task or the reward gives nothing to learn, or
 * the rollouts keep failing. ART calls the first model collapse.
 */
export class NoLearningSignalError extends PolicyloopError {
  /** How many groups in a row had no signal. */
  readonly groups: number;
  /** The step the run was at. */
  readonly step: number;

  /** How many of those were left out because too few of their rollouts finished (`minGroupSize`). */
  readonly failedGroups: number;

  constructor(groups: number, step: number, failedGroups = 0) {
    const why =
      failedGroups === 0
        ? 'each had equal rewards for all their trajectories'
        : failedGroups === groups
          ? 'each had fewer than `minGroupSize` rollouts finish (the others threw)'
          : `each had equal rewards for all their trajectories, or (${failedGroups} of them) fewer than \`minGroupSize\` rollouts that finished`;
    super(
      `No learning signal: the last ${groups} groups (at step ${step}) ${why}, so there is nothing to train on. ` +
        (failedGroups === 0
          ? 'Check the reward (does it vary between rollouts?), raise the sampling temperature or `groupSize`, or raise `collapseAfter`.'
          : "Check why the rollouts fail (the trainer's `rollout:failed` events carry each error), lower `minGroupSize`, or raise `collapseAfter`."),
    );
    this.groups = groups;
    this.step = step;
    this.failedGroups = failedGroups;
  }
}
