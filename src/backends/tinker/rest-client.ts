/**
 * The REST calls of the Tinker API on saved weights (what the SDK's `RestClient` does): listing a
 * training model's checkpoints, deleting one, and downloading sampler weights as an archive. They
 * answer at once, without a future.
 */
import { APIError } from '../../client/errors.js';
import type { TinkerHttp } from './http.js';
import type { SubmitOptions, TinkerCheckpoint, TinkerTrainingRun } from './types.js';

/**
 * The checkpoints on one server.
 * @example
 * const rest = new TinkerRestClient(http);
 * for (const checkpoint of await rest.listCheckpoints(modelId)) console.log(checkpoint.tinkerPath);
 */
export class TinkerRestClient {
  /** @param http The transport. */
  constructor(private readonly http: TinkerHttp) {}

  /** The checkpoints of a training model (`GET training_runs/{id}/checkpoints`). */
  async listCheckpoints(modelId: string, options: SubmitOptions = {}): Promise<TinkerCheckpoint[]> {
    const answer = (await this.http.json(
      'GET',
      `training_runs/${encodeURIComponent(modelId)}/checkpoints`,
      undefined,
      options,
    )) as { checkpoints?: Record<string, unknown>[] };
    return (answer.checkpoints ?? []).map((checkpoint) => ({
      checkpointId: String(checkpoint['checkpoint_id']),
      checkpointType: String(checkpoint['checkpoint_type']),
      tinkerPath: String(checkpoint['tinker_path']),
      time: typeof checkpoint['time'] === 'string' ? checkpoint['time'] : null,
      sizeBytes: typeof checkpoint['size_bytes'] === 'number' ? checkpoint['size_bytes'] : null,
      expiresAt: typeof checkpoint['expires_at'] === 'string' ? checkpoint['expires_at'] : null,
    }));
  }

  /**
   * Every training run (training model) the server keeps for this key, page by page
   * (`GET training_runs?limit&offset`, as the SDK's `list_training_runs`).
   */
  async listTrainingRuns(options: SubmitOptions = {}): Promise<TinkerTrainingRun[]> {
    const runs: TinkerTrainingRun[] = [];
    const limit = 100;
    for (let offset = 0; ; offset += limit) {
      const answer = (await this.http.json(
        'GET',
        `training_runs?limit=${limit}&offset=${offset}`,
        undefined,
        options,
      )) as {
        training_runs?: Record<string, unknown>[];
        cursor?: { total_count?: unknown };
      };
      const page = answer.training_runs ?? [];
      for (const run of page)
        runs.push({
          trainingRunId: String(run['training_run_id']),
          baseModel: String(run['base_model']),
          loraRank: typeof run['lora_rank'] === 'number' ? run['lora_rank'] : null,
          lastRequestTime: typeof run['last_request_time'] === 'string' ? run['last_request_time'] : null,
        });
      const total = answer.cursor?.total_count;
      if (page.length < limit || (typeof total === 'number' && offset + page.length >= total)) return runs;
    }
  }

  /** Deletes a checkpoint by its `tinker://<model>/<kind>/<name>` path (a 404 counts as deleted). */
  async deleteCheckpoint(path: string, options: SubmitOptions = {}): Promise<boolean> {
    const match = /^tinker:\/\/([^/]+)\/((?:weights|sampler_weights)\/[^/]+)$/.exec(path);
    if (!match) throw new Error(`Expected a tinker://<model>/<weights|sampler_weights>/<name> path, got ${path}`);
    try {
      await this.http.json(
        'DELETE',
        `training_runs/${encodeURIComponent(match[1] as string)}/checkpoints/${match[2] as string}`,
        undefined,
        options,
      );
      return true;
    } catch (error) {
      if (error instanceof APIError && error.status === 404) return false;
      throw error;
    }
  }

  /**
   * Downloads the archive (`.tar.gz`, a PEFT adapter on SkyRL) of sampler weights saved at
   * `tinker://<model>/sampler_weights/<name>`, following the server's redirect.
   */
  async downloadSamplerArchive(path: string, options: SubmitOptions = {}): Promise<Uint8Array> {
    const match = /^tinker:\/\/([^/]+)\/(?:sampler_weights\/)?([^/]+)$/.exec(path);
    if (!match) throw new Error(`Expected a tinker://<model>/sampler_weights/<name> path, got ${path}`);
    const response = await this.http.send(
      'GET',
      `training_runs/${encodeURIComponent(match[1] as string)}/checkpoints/${encodeURIComponent(match[2] as string)}/archive`,
      undefined,
      { signal: options.signal, accept: 'application/octet-stream' },
    );
    return new Uint8Array(await response.arrayBuffer());
  }
}
