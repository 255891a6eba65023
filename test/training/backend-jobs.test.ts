/**
 * A backend owns the training work: the model hands every job to `backend.jobs`, so a backend that
 * brings its own `TrainingJobs` sees each one (here: `ServiceJobs` wrapped to record the calls),
 * against the real local service.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostedBackend } from '../../src/backends/hosted-backend.js';
import { LocalBackend } from '../../src/backends/local-backend.js';
import { ServiceJobs } from '../../src/training/service-jobs.js';
import { TrainableModel } from '../../src/training/trainable-model.js';
import type { Backend, JobModel, JobReporter } from '../../src/training/backend.js';
import type { JobOptions, PruneResult, SFTParams, SFTSource, TrainResult } from 'policyloop/training';
import type { RetentionOptions } from '../../src/training/checkpoint-retention.js';

class RecordingJobs extends ServiceJobs {
  readonly calls: string[] = [];

  override trainSFT(
    model: JobModel,
    source: SFTSource | undefined,
    params: SFTParams,
    options: JobOptions,
    reporter: JobReporter,
  ): Promise<TrainResult> {
    this.calls.push('trainSFT');
    return super.trainSFT(model, source, params, options, reporter);
  }

  override discardPendingRL(model: JobModel): Promise<boolean> {
    this.calls.push('discardPendingRL');
    return super.discardPendingRL(model);
  }

  override pruneCheckpoints(
    model: JobModel,
    values: ReadonlyMap<number, number>,
    options: RetentionOptions,
  ): Promise<PruneResult> {
    this.calls.push('pruneCheckpoints');
    return super.pruneCheckpoints(model, values, options);
  }
}

describe('backend.jobs', () => {
  let dataDir: string;
  let local: LocalBackend;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-jobs-'));
    local = await LocalBackend.start({ dataDir });
  });

  afterAll(async () => {
    await local?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('does the job work of a model registered with the backend', async () => {
    const jobs = new RecordingJobs(local);
    const backend: Backend = {
      kind: 'local',
      dataDir,
      connect: (options) => local.connect(options),
      defaultLearningRate: () => local.defaultLearningRate(),
      localFileUrl: (file) => local.localFileUrl(file),
      close: async () => undefined,
      jobs,
    };
    const model = await new TrainableModel({
      project: 'jobs',
      name: 'own',
      baseModel: 'policyloop/tiny-chat',
    }).register(backend);
    const submitted: string[] = [];
    model.on('job:submitted', (event) => submitted.push(event.kind));
    const rows = [
      {
        messages: [
          { role: 'user' as const, content: 'a' },
          { role: 'assistant' as const, content: 'b' },
        ],
      },
    ];
    const { step } = await model.trainSFT(rows);
    expect(step).toBe(1);
    expect(await model.getStep()).toBe(1);
    expect(submitted).toEqual(['sft']);
    expect(await model.discardPendingJob()).toBe(false);
    const pruned = await model.pruneCheckpoints({ keepBestBy: null });
    expect(pruned.kept).toContain(1);
    expect(jobs.calls).toEqual(['trainSFT', 'discardPendingRL', 'pruneCheckpoints']);
    await model.close();
  });

  it('is a ServiceJobs on both built-in backends', () => {
    expect(local.jobs).toBeInstanceOf(ServiceJobs);
    expect(new HostedBackend({ apiKey: 'key', dataDir }).jobs).toBeInstanceOf(ServiceJobs);
  });
});
