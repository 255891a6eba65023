/** Training jobs (RL and SFT), their state and their events. */
import { CreateSFTTrainingJob, CreateTrainingJob, PageQuery, type TrainingJobDetails } from '../../schema/index.js';
import type { Context } from 'hono';
import { HttpError, validationFailure } from '../http-error.js';
import { idempotentWrite, type WriteRequest } from '../idempotency.js';
import type { RouteTable } from '../route-table.js';
import {
  parseBody,
  readIdParam,
  readQuery,
  requireAuth,
  requireModel,
  type ServiceContext,
} from '../service-context.js';
import type { JobRecord } from '../store.js';
import { checkTrainingDataUrl } from '../training-data.js';
import { toPage } from './pages.js';

/** Registers job creation (RL, SFT), job state and job events. */
export function registerJobRoutes(routes: RouteTable, service: ServiceContext): void {
  const { store, runner } = service;

  // The job row and the Idempotency-Key's answer are stored in one transaction, then the job is
  // queued. A crash in between leaves a PENDING job, which the next start fails with its terminal event.
  const createRlJob = (context: Context, request: WriteRequest): Response => {
    const body = parseBody(CreateTrainingJob, request.body);
    const model = requireModel(service, body.model_id);
    const { result: job, answer } = request.commit(
      () => store.createJob({ modelId: model.id, kind: 'rl', request: body }),
      toJobResponse,
    );
    runner.enqueue(job.id, job.model_id);
    return context.json(answer);
  };
  routes.add('POST', '/v1/preview/training-jobs', idempotentWrite(service, createRlJob));

  const createSftJob = (context: Context, request: WriteRequest): Response => {
    const body = parseBody(CreateSFTTrainingJob, request.body);
    checkTrainingDataUrl(body.training_data_url);
    const model = requireModel(service, body.model_id);
    const { result: job, answer } = request.commit(
      () => store.createJob({ modelId: model.id, kind: 'sft', request: body }),
      toJobResponse,
    );
    runner.enqueue(job.id, job.model_id);
    return context.json(answer);
  };
  routes.add('POST', '/v1/preview/sft-training-jobs', idempotentWrite(service, createSftJob));

  routes.add('GET', '/v1/preview/training-jobs/:training_job_id', async (context) => {
    requireAuth(service, context);
    const jobId = readIdParam(context, 'training_job_id');
    return context.json(toJobResponse(requireJob(service, jobId)));
  });

  routes.add('GET', '/v1/preview/training-jobs/:training_job_id/events', async (context) => {
    requireAuth(service, context);
    const jobId = readIdParam(context, 'training_job_id');
    const query = readQuery(context, PageQuery);
    requireJob(service, jobId);
    // An empty `after` (`?after=`) means no cursor: the first page.
    const page = store.listEvents(jobId, { ...query, after: query.after === '' ? undefined : query.after });
    if (page === undefined)
      throw validationFailure(['query', 'after'], `No event with id ${JSON.stringify(query.after)} in this job's list`);
    return context.json(toPage(page.items, page.hasMore));
  });
}

function requireJob(service: ServiceContext, jobId: string): JobRecord {
  const job = service.store.getJob(jobId);
  if (job === undefined) throw new HttpError(404, `Training job ${jobId} not found`);
  return job;
}

/** The full wire form of a job (the newer contract's `TrainingJobResponse`). */
export function toJobResponse(job: JobRecord): TrainingJobDetails {
  return {
    id: job.id,
    model_id: job.model_id,
    status: job.status,
    progress: job.progress,
    error_message: job.error_message,
    training_start: job.training_start,
    training_end: job.training_end,
    created_at: job.created_at,
    updated_at: job.updated_at,
  };
}
