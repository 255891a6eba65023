/**
 * The OpenAPI document of a service as it would be started with some options, without starting
 * it (`policyloop serve --print-openapi`): the same document `GET /openapi.json` answers.
 */
import { InvalidArgumentError } from '../internal/errors.js';
import { buildOpenApiDocument, type JsonObject, packageVersion } from './openapi.js';
import { parseServeOptions, type ServeOptions } from './options.js';
import { resolveTrainingDataAccess } from './training-data-access.js';

/**
 * The OpenAPI 3.1 document of the service `serve(options)` would start (base models from the
 * built-in ones, `options.models` and the Hugging Face cache; training data rules from the
 * options), without opening the data directory, loading the engine or listening. Throws an
 * `InvalidArgumentError` for a bad option or a key that is no option (argument `models` for a
 * folder the engine cannot serve), and a `TypeError` for a malformed training data entry, as
 * `serve` does.
 * @example
 * const document = await openApiDocument({ port: 8000 });
 * writeFileSync('openapi.json', JSON.stringify(document, null, 2));
 */
export async function openApiDocument(serveOptions?: ServeOptions): Promise<JsonObject> {
  const options = parseServeOptions(serveOptions);
  const [{ ModelRegistry, explicitFoldersProblem }, { MODEL_CONFIGS }] = await Promise.all([
    import('../engine/hf/registry.js'),
    import('../engine/model-config.js'),
  ]);
  const models = options.models ?? [];
  const problem = explicitFoldersProblem(models);
  if (problem !== null) throw new InvalidArgumentError('models', problem);
  const registry = new ModelRegistry(models);
  const { host, port } = options;
  const urlHost = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return buildOpenApiDocument(
    {
      baseModels: [...MODEL_CONFIGS.keys(), ...registry.models().keys()],
      describeMissingBaseModel: (id) => registry.describeMissing(id),
      trainingData: resolveTrainingDataAccess({
        dataDir: options.dataDir,
        trainingDataRoots: options.trainingDataRoots,
        allowTrainingDataDownloads: options.allowTrainingDataDownloads,
        trainingDataAllowedAddresses: options.trainingDataAllowedAddresses,
      }),
    },
    { version: packageVersion(), ...(port === 0 ? {} : { serverUrl: `http://${urlHost}:${port}` }) },
  );
}
