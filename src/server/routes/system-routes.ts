/** Health, system check, the base-model list and the OpenAPI document: the operations that need no key. */
import type { HealthResponse } from '../contract.js';
import type { EngineRuntimeReport } from '../../schema/index.js';
import { describeEngineRuntime } from '../../engine/onnx/onnx-runtime.js';
import { buildOpenApiDocument, packageVersion } from '../openapi.js';
import { operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';
import { contractContextOf, type ServiceContext } from '../service-context.js';

/**
 * Registers `GET /v1/health`, `GET /v1/system-check`, `GET /v1/preview/base-models` and
 * `GET /openapi.json`.
 */
export function registerSystemRoutes(routes: RouteTable, service: ServiceContext): void {
  routes.add(operation('getHealth'), async (context) => context.json({ status: 'ok' } satisfies HealthResponse));

  routes.add(operation('getSystemCheck'), async (context) => {
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
      const runtime = service.engine.runtime?.();
      return {
        device: 'cpu',
        base_models: baseModels.length,
        ...(runtime
          ? {
              runtime: {
                name: runtime.name,
                version: runtime.version,
                threads: runtime.threads,
                fallback_reason: runtime.fallbackReason ?? null,
                description: describeEngineRuntime(runtime),
              } satisfies EngineRuntimeReport,
            }
          : {}),
      };
    });
    const healthy = database.success && cpuQueue.success && gpuQueue.success;
    return context.json({ api: true, database, cpu_queue: cpuQueue, gpu_queue: gpuQueue }, healthy ? 200 : 503);
  });

  routes.add(operation('listBaseModels'), async (context) => context.json([...service.engine.baseModels()]));

  // Built for each request: the base models it lists are those the engine serves now.
  routes.add(operation('getOpenApiDocument'), async (context) =>
    context.json(
      buildOpenApiDocument(contractContextOf(service), {
        version: packageVersion(),
        serverUrl: new URL(context.req.url).origin,
      }),
    ),
  );
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
