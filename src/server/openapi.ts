/**
 * The local service's own OpenAPI 3.1 document, generated from the operations table
 * (`operations.ts`) and the zod schemas its routes validate with (zod 4's JSON Schema output,
 * `z.toJSONSchema`, JSON Schema 2020-12 as OpenAPI 3.1 takes it). It is what this service accepts
 * and answers, not the hosted service's published contract; docs/api/README.md lists the
 * differences.
 */
import { createRequire } from 'node:module';
import { z } from 'zod';
import {
  AdditionalHistory,
  ChatCompletionContentPart,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionToolParam,
  Choice,
  ExperimentalTrainingConfig,
  MessageOrChoice,
  PydanticException,
  SFTTrainingConfig,
  Trajectory,
  TrajectoryGroup,
} from '../schema/index.js';
import type { ContractContext } from './contract.js';
import { ErrorResponse, ValidationErrorResponse } from './contract.js';
import { IDEMPOTENCY_KEY_HEADER, MAX_IDEMPOTENCY_KEY_LENGTH, REPLAYED_HEADER } from './idempotency.js';
import { type ErrorStatus, type JsonAnswer, OPERATIONS, type Operation, resolveSchema } from './operations.js';

/** The package's version, written to `info.version`. */
export function packageVersion(): string {
  return (createRequire(import.meta.url)('../../package.json') as { version: string }).version;
}

/** A JSON value of the document (plain objects, arrays and scalars). */
export type JsonObject = Record<string, unknown>;

/** Options of {@link buildOpenApiDocument}. */
export interface OpenApiOptions {
  /** The package version written to `info.version`. */
  readonly version: string;
  /** The service's base URL (`servers[0].url`), when known. */
  readonly serverUrl?: string | undefined;
  /** The operations to write. @default OPERATIONS */
  readonly operations?: readonly Operation[] | undefined;
}

const TARGET = 'draft-2020-12';
const COMPONENT = '#/components/schemas/';
// The published documents' name for the same scheme.
const SECURITY_SCHEME = 'HTTPBearer';

/**
 * Schemas that several bodies share, named once: those of requests (and of the logged groups read
 * back as they were sent) in their input form...
 */
const SHARED_INPUT: Readonly<Record<string, z.ZodType>> = {
  AdditionalHistory,
  ChatCompletionContentPart,
  ChatCompletionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionToolParam,
  Choice,
  ExperimentalTrainingConfig,
  MessageOrChoice,
  PydanticException,
  SFTTrainingConfig,
  Trajectory,
  TrajectoryGroup,
};
/** ...and those of answers in their output form. */
const SHARED_OUTPUT: Readonly<Record<string, z.ZodType>> = { ChoiceOutput: Choice };

/** `x-request-id`: every answer that passed the service's routes carries one. */
const REQUEST_ID_HEADER = {
  description: 'The id of this request; the service log quotes it',
  required: true,
  schema: { type: 'string', pattern: '^req_[0-9a-f]{32}$' },
};

const ERROR_DESCRIPTIONS: Readonly<Record<ErrorStatus | 401 | 421 | 503, string>> = {
  401: 'No key, a malformed `Authorization` header or an unknown key (`WWW-Authenticate: Bearer`)',
  404: 'The model, training job, checkpoint step or file named does not exist',
  409: 'A conflict: the model exists (without `return_existing`, or on another base model), or a request with this `Idempotency-Key` is still being handled (`Retry-After`)',
  413: 'The request body is over the service limit (`maxBodyBytes`, 64 MiB by default)',
  421: 'The `Host` header names a host this service does not answer (it answers the name it listens on, and on loopback `localhost`, `127.0.0.1` and `[::1]`; more with `--allowed-host`)',
  422: 'The request does not fit: FastAPI validation details, each with its `loc` (`body`, `query`, `path` or `header`, then field names and indexes), `msg` and `type`',
  503: 'The service is stopping, or a chat completion did not finish within its time limit (`requestTimeoutMs`); `Retry-After` says when to try again when it is known',
};

/**
 * Builds the OpenAPI 3.1 document of a service: one path item per route, each operation with its
 * parameters, body, the 200 answer and every error status it can give (with their bodies and
 * headers), and the bearer-key security scheme. Schemas built from `context` (the served base
 * models, the training data URLs this service reads) are those of the service it describes.
 * @example
 * const document = buildOpenApiDocument(context, { version: '0.1.0', serverUrl: 'http://127.0.0.1:8000' });
 * document.paths['/v1/preview/models'].post.requestBody;
 */
export function buildOpenApiDocument(context: ContractContext, options: OpenApiOptions): JsonObject {
  const components = new Components(context);
  const paths: Record<string, Record<string, JsonObject>> = {};
  for (const operation of options.operations ?? OPERATIONS) {
    const item = paths[operation.path] ?? {};
    item[operation.method.toLowerCase()] = operationObject(operation, components);
    paths[operation.path] = item;
  }
  const errors = errorComponents(components);
  return {
    openapi: '3.1.0',
    info: {
      title: 'policyloop local training service',
      version: options.version,
      description:
        'What this policyloop service (`policyloop serve`) accepts and answers, generated from the schemas its routes validate with. ' +
        'It implements the W&B / CoreWeave Serverless Training API (the published documents docs/api/openapi.json and openapi.latest.json) ' +
        'and adds the statuses those leave out (401, 404, 409, 413, 421, 503), stricter rules (`trajectories` required, the names, base models and training data URLs this service takes), ' +
        'the long poll of job events, `Idempotency-Key`, and the `/v1/local/` read routes. A path that exists answers another method with 405 and `Allow`. See docs/api/README.md.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    ...(options.serverUrl === undefined ? {} : { servers: [{ url: options.serverUrl }] }),
    security: [{ [SECURITY_SCHEME]: [] }],
    tags: [
      { name: 'inference', description: 'OpenAI chat completions and the model list' },
      { name: 'models', description: 'Models, checkpoints and logs of the training API' },
      { name: 'training', description: 'RL and SFT training jobs and their events' },
      { name: 'local', description: 'Read routes of this service only (the dashboard, the CLI, `model.history()`)' },
      { name: 'system', description: 'Health, system check and this document' },
      { name: 'dashboard', description: 'The dashboard page and its files' },
    ],
    paths,
    components: {
      schemas: components.schemas(),
      responses: errors.responses,
      headers: errors.headers,
      securitySchemes: {
        [SECURITY_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          description:
            'A key the service was started with (`--api-key`, `POLICYLOOP_API_KEY`, else the development key `policyloop-local-dev-key`)',
        },
      },
    },
  };
}

function operationObject(operation: Operation, components: Components): JsonObject {
  const parameters: JsonObject[] = [];
  for (const name of pathParameterNames(operation.path)) {
    const schema = operation.pathParameters?.[name];
    if (schema === undefined)
      throw new Error(`Expected a schema for the path parameter {${name}} of ${operation.method} ${operation.path}`);
    parameters.push({ name, in: 'path', required: true, schema: inlineSchema(schema) });
  }
  for (const [name, field] of Object.entries(operation.query?.shape ?? {})) {
    const schema = field as z.ZodType;
    // A parameter with a default may be left out as much as an optional one.
    parameters.push({
      name,
      in: 'query',
      required: !schema.safeParse(undefined).success,
      schema: inlineSchema(schema),
    });
  }
  if (operation.idempotent === true)
    parameters.push({
      name: IDEMPOTENCY_KEY_HEADER,
      in: 'header',
      required: false,
      description:
        'Makes the write safe to retry: the first answer to a key is stored with the write (24 hours by default) and a retry with the same key and request gets it again (`Idempotent-Replayed: true`); a different request with the key is a 422, and a retry while the first is still handled a 409',
      schema: { type: 'string', minLength: 1, maxLength: MAX_IDEMPOTENCY_KEY_LENGTH, pattern: '^[\\u0020-\\u007e]*$' },
    });

  const responses: Record<string, JsonObject> = { '200': okResponse(operation, components) };
  const statuses = new Set<ErrorStatus | 401 | 421 | 503>(operation.errors);
  if (operation.public !== true) statuses.add(401);
  if (operation.body !== undefined) {
    statuses.add(413);
    statuses.add(422);
  }
  if (parameters.length > 0) statuses.add(422);
  statuses.add(421);
  statuses.add(503);
  for (const status of [...statuses].sort((a, b) => a - b))
    responses[String(status)] =
      status === 503 && operation.unavailable !== undefined
        ? {
            description: 'A check failed: the same report, with the failing check and its error',
            headers: { 'x-request-id': { $ref: '#/components/headers/RequestId' } },
            content: { 'application/json': { schema: components.ref(operation.unavailable) } },
          }
        : { $ref: `#/components/responses/${ERROR_RESPONSES[status]}` };

  const result: JsonObject = {
    operationId: operation.id,
    tags: [operation.tag],
    summary: operation.summary,
  };
  if (operation.description !== undefined) result['description'] = operation.description;
  if (operation.public === true) result['security'] = [];
  if (parameters.length > 0) result['parameters'] = parameters;
  if (operation.body !== undefined)
    result['requestBody'] = {
      required: true,
      content: {
        'application/json': {
          schema: components.ref({ name: operation.body.name, schema: operation.body.schema, io: 'input' }),
        },
      },
    };
  result['responses'] = responses;
  return result;
}

function okResponse(operation: Operation, components: Components): JsonObject {
  const headers: JsonObject = { 'x-request-id': { $ref: '#/components/headers/RequestId' } };
  if (operation.idempotent === true)
    headers[REPLAYED_HEADER.toLowerCase()] = { $ref: '#/components/headers/IdempotentReplayed' };
  const content: JsonObject = {};
  if (operation.ok.json !== undefined) content['application/json'] = { schema: components.ref(operation.ok.json) };
  if (operation.ok.events !== undefined)
    content['text/event-stream'] = {
      // One server-sent event (the form schemathesis checks each event in); OpenAPI 3.2 would say itemSchema.
      schema: {
        type: 'object',
        properties: {
          event: { type: 'string', enum: ['message'] },
          data: {
            anyOf: [
              { type: 'string', enum: ['[DONE]'] },
              {
                type: 'string',
                contentMediaType: 'application/json',
                contentSchema: components.ref(operation.ok.events),
              },
            ],
          },
        },
        required: ['data'],
      },
    };
  for (const [mediaType, schema] of Object.entries(operation.ok.other ?? {})) content[mediaType] = { schema };
  const response: JsonObject = { description: operation.ok.description, headers, content };
  if (operation.links !== undefined)
    response['links'] = Object.fromEntries(
      Object.entries(operation.links).map(([operationId, link]) => [operationId, { operationId, ...link }]),
    );
  return response;
}

/** The shared error answers (`components/responses`), by status. */
const ERROR_RESPONSES: Readonly<Record<ErrorStatus | 401 | 421 | 503, string>> = {
  401: 'Unauthorized',
  404: 'NotFound',
  409: 'Conflict',
  413: 'ContentTooLarge',
  421: 'MisdirectedRequest',
  422: 'ValidationFailed',
  503: 'ServiceUnavailable',
};

/** `components/responses` and `components/headers`: every error answer and its headers. */
function errorComponents(components: Components): { responses: JsonObject; headers: JsonObject } {
  const requestId = { $ref: '#/components/headers/RequestId' };
  const retryAfter = { $ref: '#/components/headers/RetryAfter' };
  const errorBody = {
    'application/json': { schema: components.ref({ name: 'ErrorResponse', schema: ErrorResponse }) },
  };
  const responses: JsonObject = {};
  for (const [status, name] of Object.entries(ERROR_RESPONSES)) {
    const code = Number(status) as ErrorStatus | 401 | 421 | 503;
    const headers: JsonObject = code === 421 ? {} : { 'x-request-id': requestId };
    if (code === 401) headers['www-authenticate'] = { $ref: '#/components/headers/WwwAuthenticate' };
    if (code === 409 || code === 503) headers['retry-after'] = retryAfter;
    responses[name] = {
      description: ERROR_DESCRIPTIONS[code],
      ...(Object.keys(headers).length > 0 ? { headers } : {}),
      content:
        code === 422
          ? {
              'application/json': {
                schema: components.ref({ name: 'ValidationErrorResponse', schema: ValidationErrorResponse }),
              },
            }
          : errorBody,
    };
  }
  responses['MethodNotAllowed'] = {
    description: 'A path this service has, with a method it does not answer there; `Allow` lists the ones it does',
    headers: { allow: { $ref: '#/components/headers/Allow' }, 'x-request-id': requestId },
    content: errorBody,
  };
  return {
    responses,
    headers: {
      RequestId: REQUEST_ID_HEADER,
      RetryAfter: {
        description: 'Seconds to wait before trying again, when known',
        required: false,
        schema: { type: 'integer', minimum: 0 },
      },
      WwwAuthenticate: { required: true, schema: { type: 'string', enum: ['Bearer'] } },
      Allow: { description: 'The methods this path answers', required: true, schema: { type: 'string' } },
      IdempotentReplayed: {
        description: 'Set on an answer replayed for an `Idempotency-Key` already answered',
        required: false,
        schema: { type: 'string', enum: ['true'] },
      },
    },
  };
}

function pathParameterNames(path: string): string[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map((match) => match[1] as string);
}

/** A small schema written in place (a parameter's), in its input form. */
function inlineSchema(schema: z.ZodType): JsonObject {
  return withoutMeta(z.toJSONSchema(schema, { io: 'input', target: TARGET, unrepresentable: 'throw' }) as JsonObject);
}

function withoutMeta(schema: JsonObject): JsonObject {
  const { $schema: _schema, $id: _id, ...rest } = schema;
  return rest;
}

/**
 * The named schemas of the document, in two zod registries: request bodies (and the pages read
 * back as they were sent) in their input form, answers in their output form. Schemas registered in
 * the same registry refer to each other by `$ref`.
 */
class Components {
  private readonly registries = { input: z.registry<{ id: string }>(), output: z.registry<{ id: string }>() };
  private readonly names = new Map<string, { schema: z.ZodType; io: 'input' | 'output' }>();

  constructor(private readonly context: ContractContext) {
    for (const [io, shared] of [
      ['input', SHARED_INPUT],
      ['output', SHARED_OUTPUT],
    ] as const)
      for (const [name, schema] of Object.entries(shared)) {
        this.names.set(name, { schema, io });
        this.registries[io].add(schema, { id: name });
      }
  }

  /** Registers `answer` (resolved for the service's context) and returns a `$ref` to it. */
  ref(answer: JsonAnswer): JsonObject {
    const io = answer.io ?? 'output';
    const schema = resolveSchema(answer.schema, this.context);
    const known = this.names.get(answer.name);
    if (known === undefined) {
      this.names.set(answer.name, { schema, io });
      this.registries[io].add(schema, { id: answer.name });
    } else if (known.io !== io || (known.schema !== schema && typeof answer.schema !== 'function'))
      throw new Error(`Expected one schema named ${answer.name} in the OpenAPI document, got two`);
    return { $ref: `${COMPONENT}${answer.name}` };
  }

  /** Every registered schema as JSON Schema, by name. */
  schemas(): Record<string, JsonObject> {
    const result: Record<string, JsonObject> = {};
    for (const io of ['input', 'output'] as const) {
      const generated = z.toJSONSchema(this.registries[io], {
        io,
        target: TARGET,
        unrepresentable: 'throw',
        uri: (id) => `${COMPONENT}${id}`,
      }) as { schemas: Record<string, JsonObject> };
      for (const [name, schema] of Object.entries(generated.schemas)) result[name] = withoutMeta(schema);
    }
    return Object.fromEntries(Object.entries(result).sort(([a], [b]) => a.localeCompare(b)));
  }
}
