/** `client.models`: register, delete and log to trainable models. */
import { z } from 'zod';
import { DeleteModelResponse, LogRequest, ModelCreate, ModelResponse } from '../../schema/index.js';
import type { LogRequestInput, ModelCreateInput } from '../../schema/index.js';
import { encodePathParameter, parseArgument } from '../arguments.js';
import type { RequestOptions } from '../options.js';
import type { RequestSpec, Transport } from '../transport.js';

/** The log response is any JSON: the hosted service records metrics and answers as it likes. */
const AnyJSON = z.unknown();

const LOG_TEMPLATE = '/preview/models/{model_id}/log';

/** Reads the transport of a {@link Models} (set by its static block; module-private). */
let transportOf: (models: object) => Transport | undefined = () => undefined;

/** Operations on trainable models (`/v1/preview/models`). */
export class Models {
  readonly #transport: Transport;

  static {
    // Gives this module's `serializedLogSender` the transport without a member on the public class.
    transportOf = (models) => (#transport in models ? (models as Models).#transport : undefined);
  }

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
    const context = `POST ${LOG_TEMPLATE}`;
    const id = encodePathParameter(modelId, 'modelId', context);
    const data = parseArgument(LogRequest, body, 'body', context);
    return this.#transport.request(logSpec(id, { body: data }), options);
  }
}

/** The log request of an encoded model id, with its body as a value or as serialized JSON. */
function logSpec(id: string, body: { body: unknown } | { rawBody: string }): RequestSpec<unknown> {
  return {
    method: 'POST',
    path: `/preview/models/${id}/log`,
    template: LOG_TEMPLATE,
    ...body,
    response: AnyJSON,
    responseName: 'JSON',
  };
}

/** Sends a log request whose body is already serialized JSON; see {@link serializedLogSender}. */
export type SerializedLogSender = (modelId: string, json: string, options?: RequestOptions) => Promise<unknown>;

/**
 * Internal (not exported by `policyloop/client`): a function that sends `POST .../log` with a body
 * the caller already serialized and validated, through the same transport (headers, timeout,
 * retries, errors) as `models.log`. The log batcher serializes each group once when it is added,
 * and every retry resends the same bytes. Undefined when `models` is not this package's
 * {@link Models} (a stand-in client): call its `log` then.
 */
export function serializedLogSender(models: object): SerializedLogSender | undefined {
  const transport = transportOf(models);
  if (transport === undefined) return undefined;
  return (modelId, json, options) => {
    const id = encodePathParameter(modelId, 'modelId', `POST ${LOG_TEMPLATE}`);
    return transport.request(logSpec(id, { rawBody: json }), options);
  };
}
