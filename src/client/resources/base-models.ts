/** `client.baseModels`: the base models the service can train. */
import { BaseModelList } from '../../schema/index.js';
import type { RequestOptions } from '../options.js';
import type { Transport } from '../transport.js';

/** The trainable base models (`GET /v1/preview/base-models`). */
export class BaseModels {
  readonly #transport: Transport;

  /** Internal: use `client.baseModels`. */
  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /**
   * The ids of the base models the service can train (`GET /v1/preview/base-models`).
   * @example
   * const ids = await client.baseModels.list(); // ['Qwen/Qwen2.5-14B-Instruct', ...]
   */
  async list(options?: RequestOptions): Promise<BaseModelList> {
    return this.#transport.request(
      {
        method: 'GET',
        path: '/preview/base-models',
        template: '/preview/base-models',
        response: BaseModelList,
        responseName: 'BaseModelList',
      },
      options,
    );
  }
}
