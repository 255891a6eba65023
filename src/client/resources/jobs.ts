/** `client.jobs`: start RL and SFT training jobs, read them and follow their events. */
import {
  CreateSFTTrainingJob,
  CreateTrainingJob,
  EventListQuery,
  ReceivedTrainingJobEventPage,
  TrainingJobResponse,
} from '../../schema/index.js';
import type {
  CreateSFTTrainingJobInput,
  CreateTrainingJobInput,
  ReceivedTrainingJobEvent,
} from '../../schema/index.js';
import { encodePathParameter, pagedList, parseArgument } from '../arguments.js';
import type { EventListParams, RequestOptions } from '../options.js';
import type { PagePromise } from '../pagination.js';
import type { Transport } from '../transport.js';

/** Operations on training jobs (`/v1/preview/training-jobs`, `/v1/preview/sft-training-jobs`). */
export class Jobs {
  readonly #transport: Transport;

  /** Internal: use `client.jobs`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Starts an RL training job on trajectory groups (`POST /v1/preview/training-jobs`). Its
   * finish adds one checkpoint (the next step). Not retried unless `idempotencyKey` is given.
   * @example
   * const job = await client.jobs.createRL({ model_id: model.id, trajectory_groups: groups });
   */
  async createRL(body: CreateTrainingJobInput, options?: RequestOptions): Promise<TrainingJobResponse> {
    const data = parseArgument(CreateTrainingJob, body, 'body', 'POST /preview/training-jobs');
    return this.#transport.request(
      {
        method: 'POST',
        path: '/preview/training-jobs',
        template: '/preview/training-jobs',
        body: data,
        response: TrainingJobResponse,
        responseName: 'TrainingJobResponse',
      },
      options,
    );
  }

  /**
   * Starts a supervised fine-tuning job on a JSONL file of `{messages, tools?}` rows
   * (`POST /v1/preview/sft-training-jobs`). Not retried unless `idempotencyKey` is given.
   * @example
   * const job = await client.jobs.createSFT({
   *   model_id: model.id, training_data_url: 'https://example.com/data.jsonl', config: { learning_rate: 1e-4 },
   * });
   */
  async createSFT(body: CreateSFTTrainingJobInput, options?: RequestOptions): Promise<TrainingJobResponse> {
    const data = parseArgument(CreateSFTTrainingJob, body, 'body', 'POST /preview/sft-training-jobs');
    return this.#transport.request(
      {
        method: 'POST',
        path: '/preview/sft-training-jobs',
        template: '/preview/sft-training-jobs',
        body: data,
        response: TrainingJobResponse,
        responseName: 'TrainingJobResponse',
      },
      options,
    );
  }

  /**
   * Reads a job (`GET /v1/preview/training-jobs/{training_job_id}`). Older services return only `{id}`;
   * newer ones add `status`, `progress`, timestamps...: both parse, extra fields are optional.
   * @example
   * const job = await client.jobs.retrieve(jobId);
   * if (job.status === 'FAILED') console.log(job.error_message);
   */
  async retrieve(jobId: string, options?: RequestOptions): Promise<TrainingJobResponse> {
    const template = '/preview/training-jobs/{training_job_id}';
    const id = encodePathParameter(jobId, 'jobId', `GET ${template}`);
    return this.#transport.request(
      {
        method: 'GET',
        path: `/preview/training-jobs/${id}`,
        template,
        response: TrainingJobResponse,
        responseName: 'TrainingJobResponse',
      },
      options,
    );
  }

  /**
   * Lists a job's events (`GET .../training-jobs/{training_job_id}/events`), oldest first. `for await`
   * yields every event so far across pages; pass `after` (the last event id seen) to resume.
   * A job's last event is `training_ended` or `training_failed`. An event type a newer service
   * added arrives with its own string as `type` instead of failing the listing. `wait_ms` long-polls
   * the local service: an empty answer waits up to that long for the job's next event.
   * @example
   * for await (const event of client.jobs.events(job.id)) {
   *   if (event.type === 'gradient_step') console.log(event.data.loss);
   * }
   */
  events(jobId: string, query: EventListParams = {}, options?: RequestOptions): PagePromise<ReceivedTrainingJobEvent> {
    return pagedList(
      this.#transport,
      {
        template: '/preview/training-jobs/{training_job_id}/events',
        id: { value: jobId, argument: 'jobId' },
        path: (id) => `/preview/training-jobs/${id}/events`,
        querySchema: EventListQuery,
        query,
        response: ReceivedTrainingJobEventPage,
        responseName: 'TrainingJobEventPage',
      },
      options,
    );
  }
}
