/**
 * `client.local`: the local service's own routes under `/v1/local/` (models with their latest
 * step, step metrics, a model's jobs, logged trajectory groups). The hosted service does not have
 * them: there every method rejects with a `NotFoundError` (404).
 */
import {
  CreateStepMetricsRequest,
  LocalModelListQuery,
  LocalModelPage,
  LocalModelResponse,
  LocalTrainingJobPage,
  LoggedTrajectoryGroupListQuery,
  LoggedTrajectoryGroupPage,
  listParams,
  PageQuery,
  StepMetricsListQuery,
  StepMetricsPage,
  StepMetricsResponse,
} from '../../schema/index.js';
import type {
  ListParams,
  LocalTrainingJobResponse,
  LoggedTrajectoryGroupResponse,
  CreateStepMetricsRequest as CreateStepMetricsBody,
} from '../../schema/index.js';
import { encodePathParameter, pagedList, parseArgument } from '../arguments.js';
import type { RequestOptions } from '../options.js';
import { PagePromise } from '../pagination.js';
import type { Transport } from '../transport.js';

/**
 * Query of `client.local.models.list`: `after`, `limit` and the exact-match filters `entity`,
 * `project` and `name`. Derived from `LocalModelListQuery`, the one declaration the service parses with too.
 */
export type LocalModelListParams = ListParams<typeof LocalModelListQuery>;

/**
 * Query of `client.local.metrics.list`: `after` (the `"<step>:<split>"` id of the last row
 * seen), `limit` and `split`. Derived from `StepMetricsListQuery`.
 */
export type StepMetricsListParams = ListParams<typeof StepMetricsListQuery>;

/** Query of `client.local.jobs.list`: `after` and `limit`. Derived from `PageQuery`. */
export type LocalJobListParams = ListParams<typeof PageQuery>;

/**
 * Query of `client.local.trajectoryGroups.list`: `after`, `limit` and the filters `step` (the
 * model's step when the groups were logged) and `split`. Derived from `LoggedTrajectoryGroupListQuery`.
 */
export type LoggedTrajectoryGroupListParams = ListParams<typeof LoggedTrajectoryGroupListQuery>;

/**
 * The local service's own routes (`/v1/local/...`): what dashboards, the command line and
 * `model.history()` read. Only `policyloop/server` has them; the hosted service answers 404
 * (`NotFoundError`).
 */
export class Local {
  /** Registered models, newest first, with their latest step. */
  readonly models: LocalModels;
  /** A model's metrics by step and split. */
  readonly metrics: LocalMetrics;
  /** A model's training jobs, newest first. */
  readonly jobs: LocalJobs;
  /** A model's logged trajectory groups. */
  readonly trajectoryGroups: LocalTrajectoryGroups;

  /** Internal: use `client.local`. */
  constructor(transport: Transport) {
    this.models = new LocalModels(transport);
    this.metrics = new LocalMetrics(transport);
    this.jobs = new LocalJobs(transport);
    this.trajectoryGroups = new LocalTrajectoryGroups(transport);
  }
}

/** `client.local.models`: list and read registered models (local service only). */
export class LocalModels {
  readonly #transport: Transport;

  /** Internal: use `client.local.models`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Lists registered models, newest first (`GET /v1/local/models`), each with `latest_step` and
   * `created_at`; `entity`, `project` and `name` filter by exact match. Local service only: the
   * hosted service answers 404 (`NotFoundError`).
   * @example
   * for await (const model of client.local.models.list({ project: 'quickstart' })) {
   *   console.log(`${model.name}: step ${model.latest_step}`);
   * }
   */
  list(query: LocalModelListParams = {}, options?: RequestOptions): PagePromise<LocalModelResponse> {
    const template = '/local/models';
    let parsed: LocalModelListParams;
    try {
      parsed = parseArgument(listParams(LocalModelListQuery), query, 'query', `GET ${template}`);
    } catch (error) {
      return PagePromise.reject(error);
    }
    const { after: first, ...rest } = parsed;
    return new PagePromise(
      (after) =>
        this.#transport.request(
          {
            method: 'GET',
            path: template,
            template,
            query: { after, ...rest },
            response: LocalModelPage,
            responseName: 'LocalModelPage',
          },
          options,
        ),
      first,
    );
  }

  /**
   * Reads one model (`GET /v1/local/models/{model_id}`) with its `latest_step`. Rejects with
   * `NotFoundError` for an unknown model, and on the hosted service, which has no such route.
   * @example
   * const { latest_step } = await client.local.models.retrieve(model.id);
   */
  async retrieve(modelId: string, options?: RequestOptions): Promise<LocalModelResponse> {
    const template = '/local/models/{model_id}';
    const id = encodePathParameter(modelId, 'modelId', `GET ${template}`);
    return this.#transport.request(
      {
        method: 'GET',
        path: `/local/models/${id}`,
        template,
        response: LocalModelResponse,
        responseName: 'LocalModelResponse',
      },
      options,
    );
  }
}

/** `client.local.metrics`: a model's step metrics (local service only). */
export class LocalMetrics {
  readonly #transport: Transport;

  /** Internal: use `client.local.metrics`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Lists a model's metrics by step, then split (`GET /v1/local/models/{model_id}/metrics`). Each
   * item merges every row recorded for its step and split, in the order they were recorded (a
   * name written later replaces the earlier value). Names carry no split prefix: `reward` under
   * split `val` is what `history.jsonl` calls `val/reward`. Local service only: the hosted service
   * answers 404 (`NotFoundError`).
   * @example
   * for await (const row of client.local.metrics.list(model.id, { split: 'val' })) {
   *   console.log(row.step, row.metrics['reward']);
   * }
   */
  list(modelId: string, query: StepMetricsListParams = {}, options?: RequestOptions): PagePromise<StepMetricsResponse> {
    return pagedList(
      this.#transport,
      {
        template: '/local/models/{model_id}/metrics',
        id: { value: modelId, argument: 'modelId' },
        path: (id) => `/local/models/${id}/metrics`,
        querySchema: StepMetricsListQuery,
        query,
        response: StepMetricsPage,
        responseName: 'StepMetricsPage',
      },
      options,
    );
  }

  /**
   * Records metrics a client computed itself (training loss, job metrics, evaluation results) for
   * a step and split (`POST /v1/local/models/{model_id}/metrics`); resolves with that step and
   * split's merged metrics. Values must be finite numbers; names carry no split prefix. Sending
   * the same body twice changes nothing; pass `idempotencyKey` to let the client retry it (the
   * service then answers a retry from the first write). Local service only: the hosted service answers 404 (`NotFoundError`).
   * @example
   * await client.local.metrics.create(model.id, { step: 3, split: 'train', metrics: { loss: 0.42 } });
   */
  async create(modelId: string, body: CreateStepMetricsBody, options?: RequestOptions): Promise<StepMetricsResponse> {
    const template = '/local/models/{model_id}/metrics';
    const context = `POST ${template}`;
    const id = encodePathParameter(modelId, 'modelId', context);
    const data = parseArgument(CreateStepMetricsRequest, body, 'body', context);
    return this.#transport.request(
      {
        method: 'POST',
        path: `/local/models/${id}/metrics`,
        template,
        body: data,
        response: StepMetricsResponse,
        responseName: 'StepMetricsResponse',
      },
      options,
    );
  }
}

/** `client.local.jobs`: a model's training jobs (local service only). */
export class LocalJobs {
  readonly #transport: Transport;

  /** Internal: use `client.local.jobs`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Lists a model's training jobs, newest first (`GET /v1/local/models/{model_id}/jobs`), each
   * with its `kind` (`rl` or `sft`), status, progress and times. Local service only: the hosted
   * service answers 404 (`NotFoundError`).
   * @example
   * const [latest] = (await client.local.jobs.list(model.id, { limit: 1 })).data;
   * console.log(latest?.status);
   */
  list(
    modelId: string,
    query: LocalJobListParams = {},
    options?: RequestOptions,
  ): PagePromise<LocalTrainingJobResponse> {
    return pagedList(
      this.#transport,
      {
        template: '/local/models/{model_id}/jobs',
        id: { value: modelId, argument: 'modelId' },
        path: (id) => `/local/models/${id}/jobs`,
        querySchema: PageQuery,
        query,
        response: LocalTrainingJobPage,
        responseName: 'LocalTrainingJobPage',
      },
      options,
    );
  }
}

/** `client.local.trajectoryGroups`: a model's logged trajectory groups (local service only). */
export class LocalTrajectoryGroups {
  readonly #transport: Transport;

  /** Internal: use `client.local.trajectoryGroups`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Lists the trajectory groups logged for a model (`GET /v1/local/models/{model_id}/trajectory-groups`),
   * in the order they were logged, optionally only one `step` and/or `split`. Each item carries
   * the `group` as logged, with the step and split it was logged under. Local service only: the
   * hosted service answers 404 (`NotFoundError`).
   * @example
   * for await (const { group } of client.local.trajectoryGroups.list(model.id, { step: 2, split: 'val' })) {
   *   console.log(group.trajectories.map((trajectory) => trajectory.reward));
   * }
   */
  list(
    modelId: string,
    query: LoggedTrajectoryGroupListParams = {},
    options?: RequestOptions,
  ): PagePromise<LoggedTrajectoryGroupResponse> {
    return pagedList(
      this.#transport,
      {
        template: '/local/models/{model_id}/trajectory-groups',
        id: { value: modelId, argument: 'modelId' },
        path: (id) => `/local/models/${id}/trajectory-groups`,
        querySchema: LoggedTrajectoryGroupListQuery,
        query,
        response: LoggedTrajectoryGroupPage,
        responseName: 'LoggedTrajectoryGroupPage',
      },
      options,
    );
  }
}
