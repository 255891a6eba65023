/** What every route handler needs: the store, the engine, the job runner and request helpers. */
import type { Context } from 'hono';
import type { z } from 'zod';
import { Uuid } from '../schema/index.js';
import type { Engine } from '../engine/types.js';
import type { ContractContext } from './contract.js';
import { HttpError, RequestValidationError } from './http-error.js';
import type { IdempotencyKeys } from './idempotency.js';
import type { JobRunner } from './job-runner.js';
import type { ResolvedServerOptions } from './options.js';
import { NO_BODY, parseJsonBodyText, readBodyText } from './request-body.js';
import type { ModelRecord, Store } from './store/index.js';
import { parseOrThrow } from './validation.js';

/** The parts of one service instance, shared by its routes. */
export interface ServiceContext {
  readonly options: ResolvedServerOptions;
  readonly store: Store;
  readonly engine: Engine;
  readonly runner: JobRunner;
  /** Stored answers to `Idempotency-Key`s and the keys in flight. */
  readonly idempotency: IdempotencyKeys;
  /** Aborts when the service stops waiting for requests in flight (see `App.close`). */
  readonly stopping: AbortSignal;
}

/** Reads the JSON body under the size limit and validates it with `schema` (422 with `body` locs). */
export async function readBody<Schema extends z.ZodType>(
  service: ServiceContext,
  context: Context,
  schema: Schema,
): Promise<z.output<Schema>> {
  return parseBody(schema, await readJsonBodyValue(service, context));
}

/** Reads the JSON body under the size limit, unvalidated (422 `missing` when there is none). */
export async function readJsonBodyValue(service: ServiceContext, context: Context): Promise<unknown> {
  return (await readJsonBodyWithText(service, context)).value;
}

/** Like {@link readJsonBodyValue}, with the body's text as received. */
export async function readJsonBodyWithText(
  service: ServiceContext,
  context: Context,
): Promise<{ value: unknown; text: string }> {
  const text = await readBodyText(context.req.raw, service.options.maxBodyBytes);
  const value = parseJsonBodyText(text);
  if (value === NO_BODY) throw new RequestValidationError([{ loc: ['body'], msg: 'Field required', type: 'missing' }]);
  return { value, text };
}

/** Validates a parsed body with `schema` (422 with `body` locs). */
export function parseBody<Schema extends z.ZodType>(schema: Schema, value: unknown): z.output<Schema> {
  return parseOrThrow(schema, value, 'body');
}

/** Validates the query string with `schema` (422 with `query` locs). */
export function readQuery<Schema extends z.ZodType>(context: Context, schema: Schema): z.output<Schema> {
  return parseOrThrow(schema, context.req.query(), 'query');
}

/** Reads a UUID path parameter (422 with a `path` loc when it is not a UUID). */
export function readIdParam(context: Context, name: string): string {
  const value = context.req.param(name) ?? '';
  const result = Uuid.safeParse(value);
  if (!result.success) {
    throw new RequestValidationError([
      {
        loc: ['path', name],
        msg: `Input should be a valid UUID, got ${JSON.stringify(value.slice(0, 100))}`,
        type: 'uuid_parsing',
      },
    ]);
  }
  // UUIDs are case-insensitive (the hosted service parses them); stored ids are lower case.
  return result.data.toLowerCase();
}

/** The model with this id (any letter case), or a 404. */
export function requireModel(service: ServiceContext, modelId: string): ModelRecord {
  const model = service.store.models.get(modelId.toLowerCase());
  if (model === undefined) throw new HttpError(404, `Model ${modelId} not found`);
  return model;
}

/** The service's {@link ContractContext}: its base models now, and its training data rules. */
export function contractContextOf(service: ServiceContext): ContractContext {
  const engine = service.engine;
  return {
    baseModels: engine.baseModels(),
    describeMissingBaseModel:
      engine.describeMissingBaseModel === undefined ? undefined : (id) => engine.describeMissingBaseModel?.(id) ?? '',
    trainingData: service.options.trainingData,
    lossFns: engine.lossFns?.(),
  };
}
