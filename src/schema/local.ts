/**
 * Bodies, queries and responses of the local service's own routes under `/v1/local/` (models,
 * step metrics, jobs and logged trajectory groups). They are not part of the training API
 * contract: the hosted service does not have them (it answers 404).
 */
import { z } from 'zod';
import { ModelResponse, TrainingJobDetails } from './api.js';
import { page, PageQuery } from './page.js';
import { TrajectoryGroup } from './trajectory.js';

const dateTime = z.iso.datetime({ offset: true, local: true });

/**
 * No control characters (C0, DEL, C1) or bidirectional overrides: names holding them would
 * rewrite what a terminal shows when they are printed. Written with `\uXXXX` escapes only, so that
 * the pattern reads the same in the service's OpenAPI document (ECMAScript, Python and Rust regular
 * expressions alike).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters it refuses
const NO_CONTROL_CHARACTER = /^[^\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]*$/;

/** A split name as the local routes take it: non-empty, at most 100 characters, no `/`, no control characters. */
export const SplitName = z
  .string()
  .min(1, 'Expected a non-empty split name')
  .max(100, 'Expected a split name of at most 100 characters')
  .regex(/^[^/]*$/, {
    error: (issue) => `Expected a split name without '/', got ${JSON.stringify(issue.input)}`,
  })
  .regex(NO_CONTROL_CHARACTER, {
    error: 'Expected a split name without control characters (such as ESC, BEL or backspace)',
  });
export type SplitName = z.infer<typeof SplitName>;

/**
 * A model as the local routes list it: the contract's {@link ModelResponse} plus the step of its
 * newest checkpoint (`latest_step`, 0 before any training) and when it was registered.
 */
export const LocalModelResponse = ModelResponse.extend({
  latest_step: z.int(),
  created_at: dateTime,
});
export type LocalModelResponse = z.infer<typeof LocalModelResponse>;

/** A page of models, newest first (`GET /v1/local/models`). */
export const LocalModelPage = page(LocalModelResponse);
export type LocalModelPage = z.output<typeof LocalModelPage>;

/**
 * Query of `GET /v1/local/models`: a page query plus exact-match filters on `entity`, `project`
 * and `name` (each optional).
 * @example
 * LocalModelListQuery.parse({ project: 'quickstart', limit: '5' });
 */
export const LocalModelListQuery = PageQuery.extend({
  entity: z.string().min(1).optional(),
  project: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
});
export type LocalModelListQuery = z.output<typeof LocalModelListQuery>;

/**
 * The metrics of one step and split, merged from every row recorded for them (by the log route
 * and by `POST /v1/local/models/{model_id}/metrics`) in the order they were recorded: a name
 * written later replaces the earlier value, names not repeated stay. Names carry no split prefix
 * (`reward`, not `train/reward`). `id` is `"<step>:<split>"`, the cursor of the list.
 */
export const StepMetricsResponse = z.object({
  id: z.string(),
  step: z.int(),
  split: z.string(),
  metrics: z.record(z.string(), z.number()),
  /** When the newest of the merged rows was recorded. */
  updated_at: dateTime,
});
export type StepMetricsResponse = z.infer<typeof StepMetricsResponse>;

/** A page of step metrics, by step then split (`GET /v1/local/models/{model_id}/metrics`). */
export const StepMetricsPage = page(StepMetricsResponse);
export type StepMetricsPage = z.output<typeof StepMetricsPage>;

/** Query of the step-metrics list: a page query plus an optional `split` filter. */
export const StepMetricsListQuery = PageQuery.extend({ split: SplitName.optional() });
export type StepMetricsListQuery = z.output<typeof StepMetricsListQuery>;

/** A metric name: non-empty, at most 200 characters, no control characters. */
const MetricName = z
  .string()
  .min(1, 'Expected a non-empty metric name')
  .max(200, 'Expected a metric name of at most 200 characters')
  .regex(NO_CONTROL_CHARACTER, {
    error: 'Expected a metric name without control characters (such as ESC, BEL or backspace)',
  });

/**
 * Body of `POST /v1/local/models/{model_id}/metrics`: numbers a client computed itself (training
 * loss, job metrics, evaluation results) for one step and split. Closed schema; metric values are
 * finite numbers; names carry no split prefix (`loss` under split `train`, not `train/loss`).
 * @example
 * CreateStepMetricsRequest.parse({ step: 3, split: 'train', metrics: { loss: 0.42, grad_norm: 1.3 } });
 */
export const CreateStepMetricsRequest = z
  .strictObject({
    step: z.int().min(0),
    split: SplitName,
    metrics: z
      .record(
        MetricName,
        z.number({
          error: (issue) =>
            `Expected a finite number, got ${issue.input === null ? 'null' : typeof issue.input === 'number' ? String(issue.input) : typeof issue.input}`,
        }),
      )
      // Checked below with its own message; stated here for the JSON Schema (the service's OpenAPI document).
      .meta({ minProperties: 1 }),
  })
  .superRefine((body, context) => {
    const names = Object.keys(body.metrics);
    if (names.length === 0)
      context.addIssue({ code: 'custom', path: ['metrics'], message: 'Expected at least one metric, got none' });
    for (const name of names) {
      if (name.startsWith(`${body.split}/`))
        context.addIssue({
          code: 'custom',
          path: ['metrics', name],
          message: `Expected a metric name without the split prefix, got ${JSON.stringify(name)} (send ${JSON.stringify(name.slice(body.split.length + 1))})`,
        });
    }
  });
export type CreateStepMetricsRequest = z.output<typeof CreateStepMetricsRequest>;

/** A training job as the local routes list it: the full job plus its `kind` (`rl` or `sft`). */
export const LocalTrainingJobResponse = TrainingJobDetails.extend({ kind: z.enum(['rl', 'sft']) });
export type LocalTrainingJobResponse = z.infer<typeof LocalTrainingJobResponse>;

/** A page of a model's jobs, newest first (`GET /v1/local/models/{model_id}/jobs`). */
export const LocalTrainingJobPage = page(LocalTrainingJobResponse);
export type LocalTrainingJobPage = z.output<typeof LocalTrainingJobPage>;

/**
 * A trajectory group as the log route stored it, with the step (the model's step when it was
 * logged) and split it was logged under. `id` is an opaque cursor.
 */
export const LoggedTrajectoryGroupResponse = z.object({
  id: z.string(),
  step: z.int(),
  split: z.string(),
  created_at: dateTime,
  group: TrajectoryGroup,
});
export type LoggedTrajectoryGroupResponse = z.output<typeof LoggedTrajectoryGroupResponse>;

/** A page of logged groups, in the order they were logged. */
export const LoggedTrajectoryGroupPage = page(LoggedTrajectoryGroupResponse);
export type LoggedTrajectoryGroupPage = z.output<typeof LoggedTrajectoryGroupPage>;

/** Query of the logged-groups list: a page query plus optional `step` and `split` filters. */
export const LoggedTrajectoryGroupListQuery = PageQuery.extend({
  step: z.coerce.number().int().min(0).optional(),
  split: SplitName.optional(),
});
export type LoggedTrajectoryGroupListQuery = z.output<typeof LoggedTrajectoryGroupListQuery>;
