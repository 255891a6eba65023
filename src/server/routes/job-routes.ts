/** Training jobs (RL and SFT), their state and their events. */
import { EventListQuery, type TrainingJobDetails } from '../../schema/index.js';
import type { Context } from 'hono';
import { rlJobBody, sftJobBody } from '../contract.js';
import { HttpError, validationFailure } from '../http-error.js';
import { idempotentWrite, type WriteRequest } from '../idempotent-write.js';
import { operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';
import {
  contractContextOf,
  parseBody,
  readIdParam,
  readQuery,
  requireModel,
  type ServiceContext,
} from '../service-context.js';
import type { JobRecord } from '../store/index.js';
import { checkTrainingDataUrl } from '../training-data.js';
import { toPage } from './pages.js';

/** Registers job creation (RL, SFT), job state and job events. */
export function registerJobRoutes(routes: RouteTable, service: ServiceContext): void {
  const { store, runner } = service;

  // The job row and the Idempotency-Key's answer are stored in one transaction, then the job is
  // queued. A crash in between leaves a PENDING job, which the next start fails with its terminal event.
  const createRlJob = (context: Context, request: WriteRequest): Response => {
    const body = parseBody(rlJobBody(contractContextOf(service)), request.body);
    const model = requireModel(service, body.model_id);
    const { result: job, answer } = request.commit(
      () => store.jobs.create({ modelId: model.id, kind: 'rl', request: body }),
      toJobResponse,
    );
    runner.enqueue(job.id, job.model_id);
    return context.json(answer);
  };
  routes.add(operation('createTrainingJob'), idempotentWrite(service, createRlJob));

  const createSftJob = (context: Context, request: WriteRequest): Response => {
    const body = parseBody(sftJobBody(contractContextOf(service)), request.body);
    checkTrainingDataUrl(body.training_data_url, service.options.trainingData);
    const model = requireModel(service, body.model_id);
    const { result: job, answer } = request.commit(
      () => store.jobs.create({ modelId: model.id, kind: 'sft', request: body }),
      toJobResponse,
    );
    runner.enqueue(job.id, job.model_id);
    return context.json(answer);
  };
  routes.add(operation('createSftTrainingJob'), idempotentWrite(service, createSftJob));

  routes.add(operation('getTrainingJob'), async (context) => {
    const jobId = readIdParam(context, 'training_job_id');
    return context.json(toJobResponse(requireJob(service, jobId)));
  });

  routes.add(operation('listTrainingJobEvents'), async (context) => {
    const jobId = readIdParam(context, 'training_job_id');
    const query = readQuery(context, EventListQuery);
    const job = requireJob(service, jobId);
    // An empty `after` (`?after=`) means no cursor: the first page.
    const pageQuery = { limit: query.limit, after: query.after === '' ? undefined : query.after };
    let page = store.jobEvents.list(jobId, pageQuery);
    if (page === undefined)
      throw validationFailure(['query', 'after'], `No event with id ${JSON.stringify(query.after)} in this job's list`);
    // Long poll: nothing new yet, and the job may still add events: wait for one (or the time).
    if (page.items.length === 0 && query.wait_ms > 0 && (job.status === 'PENDING' || job.status === 'RUNNING')) {
      await nextJobEvent(service, jobId, query.wait_ms, context.req.raw.signal);
      if (!store.isOpen) return context.json(toPage([], false));
      requireJob(service, jobId);
      page = store.jobEvents.list(jobId, pageQuery) ?? page;
    }
    return context.json(toPage(page.items, page.hasMore));
  });
}

/** Resolves at the job's next event, after `waitMs`, or when the client leaves or the service stops. */
function nextJobEvent(service: ServiceContext, jobId: string, waitMs: number, client: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const signals = [client, service.stopping];
    let stop = (): void => undefined;
    const done = (): void => {
      stop();
      clearTimeout(timer);
      for (const signal of signals) signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, waitMs);
    stop = service.store.jobEvents.onEvent(jobId, done);
    for (const signal of signals) {
      if (signal.aborted) done();
      else signal.addEventListener('abort', done, { once: true });
    }
  });
}

function requireJob(service: ServiceContext, jobId: string): JobRecord {
  const job = service.store.jobs.get(jobId);
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
