/**
 * The OpenAPI document of a service as it would be started with some options, without starting
 * it (`policyloop serve --print-openapi`): the same document `GET /openapi.json` answers.
 */
import { DEFAULT_DATA_DIR } from '../internal/env.js';
import { InvalidArgumentError } from '../internal/errors.js';
import { buildOpenApiDocument, type JsonObject, packageVersion } from './openapi.js';
import type { ServeOptions } from './options.js';
import { resolveTrainingDataAccess } from './training-data-access.js';

/**
 * The OpenAPI 3.1 document of the service `serve(options)` would start (base models from the
 * built-in ones, `options.models` and the Hugging Face cache; training data rules from the
 * options), without opening the data directory, loading the engine or listening. Throws an
 * `InvalidArgumentError` (argument `models`) for a folder of `models` the engine cannot serve,
 * and a `TypeError` for a malformed training data option, as `serve` does.
 * @example
 * const document = await openApiDocument({ port: 8000 });
 * writeFileSync('openapi.json', JSON.stringify(document, null, 2));
 */
export async function openApiDocument(options: ServeOptions = {}): Promise<JsonObject> {
  const [{ ModelRegistry, explicitFoldersProblem }, { MODEL_CONFIGS }] = await Promise.all([
    import('../engine/hf/registry.js'),
    import('../engine/model-config.js'),
  ]);
  const models = options.models ?? [];
  const problem = explicitFoldersProblem(models);
  if (problem !== null) throw new InvalidArgumentError('models', problem);
  const registry = new ModelRegistry(models);
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 8000;
  const urlHost = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return buildOpenApiDocument(
    {
      baseModels: [...MODEL_CONFIGS.keys(), ...registry.models().keys()],
      describeMissingBaseModel: (id) => registry.describeMissing(id),
      trainingData: resolveTrainingDataAccess({
        dataDir: options.dataDir ?? DEFAULT_DATA_DIR,
        trainingDataRoots: options.trainingDataRoots,
        allowTrainingDataDownloads: options.allowTrainingDataDownloads,
        trainingDataAllowedAddresses: options.trainingDataAllowedAddresses,
      }),
    },
    { version: packageVersion(), ...(port === 0 ? {} : { serverUrl: `http://${urlHost}:${port}` }) },
  );
}
