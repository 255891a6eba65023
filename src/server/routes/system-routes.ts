/** Health, system check and the base-model list: the operations that need no key. */
import type { RouteTable } from '../route-table.js';
import type { ServiceContext } from '../service-context.js';

/** Registers `GET /v1/health`, `GET /v1/system-check` and `GET /v1/preview/base-models`. */
export function registerSystemRoutes(routes: RouteTable, service: ServiceContext): void {
  routes.addPublic('GET', '/v1/health', async (context) => context.json({ status: 'ok' }));

  routes.addPublic('GET', '/v1/system-check', async (context) => {
    const database = timedCheck(() => {
      service.store.ping();
      return {};
    });
    const stats = service.runner.stats();
    const cpuQueue = {
      success: service.store.isOpen,
      error: service.store.isOpen ? null : 'The job queue is stopped',
      running_jobs: stats.running,
      queued_jobs: stats.queued,
      max_concurrent_jobs: stats.maxConcurrentJobs,
    };
    const gpuQueue = timedCheck(() => {
      const baseModels = service.engine.baseModels();
      if (baseModels.length === 0) throw new Error('The engine serves no base model');
      // The local engine has no GPU: training and sampling share the CPU with the job queue.
      return { device: 'cpu', base_models: baseModels.length };
    });
    const healthy = database.success && cpuQueue.success && gpuQueue.success;
    return context.json({ api: true, database, cpu_queue: cpuQueue, gpu_queue: gpuQueue }, healthy ? 200 : 503);
  });

  routes.addPublic('GET', '/v1/preview/base-models', async (context) => context.json([...service.engine.baseModels()]));
}

function timedCheck(
  check: () => Record<string, unknown>,
): { success: boolean; duration_ms: number; error: string | null } & Record<string, unknown> {
  const start = performance.now();
  try {
    const details = check();
    return { success: true, duration_ms: performance.now() - start, error: null, ...details };
  } catch (error) {
    return {
      success: false,
      duration_ms: performance.now() - start,
      error: error instanceof Error ? error.message : String(error),
    };
  }
}
