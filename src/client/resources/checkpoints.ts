/** `client.checkpoints`: list and delete a model's checkpoints. */
import {
  CheckpointListQuery,
  CheckpointPage,
  DeleteCheckpointsRequest,
  DeleteCheckpointsResponse,
} from '../../schema/index.js';
import type { CheckpointResponse } from '../../schema/index.js';
import { encodePathParameter, pagedList, parseArgument } from '../arguments.js';
import type { CheckpointListParams, RequestOptions } from '../options.js';
import type { PagePromise } from '../pagination.js';
import type { Transport } from '../transport.js';

/** Operations on checkpoints (`/v1/preview/models/{model_id}/checkpoints`). */
export class Checkpoints {
  readonly #transport: Transport;

  /** Internal: use `client.checkpoints`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * Lists a model's checkpoints (`GET .../checkpoints`), a cursor page ordered by step.
   * `await` it for one page, or `for await` over every checkpoint.
   * @example
   * // The current step (policy version): the newest checkpoint's, or 0 before any training.
   * const page = await client.checkpoints.list(model.id, { limit: 1, order: 'desc' });
   * const step = page.data[0]?.step ?? 0;
   */
  list(modelId: string, query: CheckpointListParams = {}, options?: RequestOptions): PagePromise<CheckpointResponse> {
    return pagedList(
      this.#transport,
      {
        template: '/preview/models/{model_id}/checkpoints',
        id: { value: modelId, argument: 'modelId' },
        path: (id) => `/preview/models/${id}/checkpoints`,
        querySchema: CheckpointListQuery,
        query,
        response: CheckpointPage,
        responseName: 'CheckpointPage',
      },
      options,
    );
  }

  /**
   * Deletes checkpoints by step (`DELETE .../checkpoints` with the JSON body `{steps}`).
   * Steps that do not exist are reported back, not an error.
   * @example
   * const { deleted_count, not_found_steps } = await client.checkpoints.delete(model.id, { steps: [1, 2] });
   */
  async delete(
    modelId: string,
    body: DeleteCheckpointsRequest,
    options?: RequestOptions,
  ): Promise<DeleteCheckpointsResponse> {
    const template = '/preview/models/{model_id}/checkpoints';
    const context = `DELETE ${template}`;
    const id = encodePathParameter(modelId, 'modelId', context);
    const data = parseArgument(DeleteCheckpointsRequest, body, 'body', context);
    return this.#transport.request(
      {
        method: 'DELETE',
        path: `/preview/models/${id}/checkpoints`,
        template,
        body: data,
        response: DeleteCheckpointsResponse,
        responseName: 'DeleteCheckpointsResponse',
      },
      options,
    );
  }
}
