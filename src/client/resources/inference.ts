/** `client.inference`: the inference API, which has its own base URL. */
import { z } from 'zod';
import { InferenceModelList } from '../../schema/index.js';
import { parseArgument } from '../arguments.js';
import type { InferenceModelListParams, RequestOptions } from '../options.js';
import type { Transport } from '../transport.js';

const Params = z.strictObject({
  project: z
    .string()
    .regex(/^[^/\s]+\/[^/\s]+$/, 'Expected "team/project" (one slash, no spaces)')
    .optional(),
});

/** The inference API's models (`GET /v1/models`, OpenAI shape). */
export class InferenceModels {
  readonly #transport: Transport;
  readonly #baseURL: string;

  /** Internal: use `client.inference.models`. */
  constructor(transport: Transport, baseURL: string) {
    this.#transport = transport;
    this.#baseURL = baseURL;
  }

  /**
   * Lists the models the inference API serves (`GET /v1/models` on the inference base URL).
   * `project: 'team/project'` is sent as the `OpenAI-Project` header, which adds that project's
   * trained models.
   * @example
   * const { data } = await client.inference.models.list({ project: 'my-team/demo' }, { timeout: 5_000 });
   */
  async list(params: InferenceModelListParams = {}, options?: RequestOptions): Promise<InferenceModelList> {
    const { project } = parseArgument(Params, params, 'params', 'GET /models');
    return this.#transport.request(
      {
        method: 'GET',
        baseURL: this.#baseURL,
        path: '/models',
        template: '/models',
        headers: project === undefined ? undefined : { 'OpenAI-Project': project },
        response: InferenceModelList,
        responseName: 'InferenceModelList',
      },
      options,
    );
  }
}

/** The inference API's resources. */
export class Inference {
  /** `GET /v1/models`. */
  readonly models: InferenceModels;

  /** Internal: use `client.inference`. */
  constructor(transport: Transport, baseURL: string) {
    this.models = new InferenceModels(transport, baseURL);
  }
}
