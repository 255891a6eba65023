/** `client.models`: register, delete and log to trainable models. */
import { z } from 'zod';
import { DeleteModelResponse, LogRequest, ModelCreate, ModelResponse } from '../../schema/index.js';
import type { LogRequestInput, ModelCreateInput } from '../../schema/index.js';
import { encodePathParameter, parseArgument } from '../arguments.js';
import type { RequestOptions } from '../options.js';
import type { Transport } from '../transport.js';

/** The log response is any JSON: the hosted service records metrics and answers as it likes. */
const AnyJSON = z.unknown();

/**
 * Internal: `client.models[LOG_SERIALIZED](modelId, json, options)` sends a log request whose body
 * is already serialized (the log batcher serializes each group once, and a retry resends the same
 * bytes). Not part of the public API.
 */
export const LOG_SERIALIZED: unique symbol = Symbol('policyloop.logSerialized');

/** Operations on trainable models (`/v1/preview/models`). */
export class Models {
  readonly #transport: Transport;

  /** Internal: use `client.models`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Registers a trainable model (`POST /v1/preview/models`). With `return_existing: true` it is
   * get-or-create: the same `(entity, project, name)` returns the same model; without it a
   * duplicate name is a `ConflictError`.
   * @example
   * const model = await client.models.create({
   *   project: 'demo', name: 'agent-001', base_model: 'Qwen/Qwen2.5-14B-Instruct', return_existing: true,
   * });
   */
  async create(body: ModelCreateInput, options?: RequestOptions): Promise<ModelResponse> {
    const context = 'POST /preview/models';
    const data = parseArgument(ModelCreate, body, 'body', context);
    return this.#transport.request(
      {
        method: 'POST',
        path: '/preview/models',
        template: '/preview/models',
        body: data,
        response: ModelResponse,
        responseName: 'ModelResponse',
      },
      options,
    );
  }

  /**
   * Deletes a model with its checkpoints and run (`DELETE /v1/preview/models/{model_id}`).
   * @example
   * const { deleted_checkpoints } = await client.models.delete(model.id);
   */
  async delete(modelId: string, options?: RequestOptions): Promise<DeleteModelResponse> {
    const template = '/preview/models/{model_id}';
    const id = encodePathParameter(modelId, 'modelId', `DELETE ${template}`);
    return this.#transport.request(
      {
        method: 'DELETE',
        path: `/preview/models/${id}`,
        template,
        response: DeleteModelResponse,
        responseName: 'DeleteModelResponse',
      },
      options,
    );
  }

  /**
   * Logs trajectory groups for metrics without training (`POST /v1/preview/models/{model_id}/log`).
   * The response is whatever JSON the service returns.
   * @example
   * await client.models.log(model.id, { split: 'val', trajectory_groups: groups });
   */
  async log(modelId: string, body: LogRequestInput, options?: RequestOptions): Promise<unknown> {
    const template = '/preview/models/{model_id}/log';
    const context = `POST ${template}`;
    const id = encodePathParameter(modelId, 'modelId', context);
    const data = parseArgument(LogRequest, body, 'body', context);
    return this.#transport.request(
      {
        method: 'POST',
        path: `/preview/models/${id}/log`,
        template,
        body: data,
        response: AnyJSON,
        responseName: 'JSON',
      },
      options,
    );
  }

  /** Internal: see {@link LOG_SERIALIZED}. */
  async [LOG_SERIALIZED](modelId: string, json: string, options?: RequestOptions): Promise<unknown> {
    const template = '/preview/models/{model_id}/log';
    const id = encodePathParameter(modelId, 'modelId', `POST ${template}`);
    return this.#transport.request(
      {
        method: 'POST',
        path: `/preview/models/${id}/log`,
        template,
        rawBody: json,
        response: AnyJSON,
        responseName: 'JSON',
      },
      options,
    );
  }
}
