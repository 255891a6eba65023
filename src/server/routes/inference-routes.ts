/** The inference API on the same port: chat completions (plain and streamed) and `GET /v1/models`. */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type { Context } from 'hono';
import {
  ChatCompletionRequestBody,
  type ChatCompletionResponseBody,
  type ChatCompletionResult,
  type InferenceModel,
  type InferenceModelList,
} from '../../schema/index.js';
import { EngineInputError, EngineUnavailableError, type PolicyRef } from '../../engine/types.js';
import { completionChunks, eventStream } from '../chat-completion-stream.js';
import { HttpError, RequestValidationError } from '../http-error.js';
import { inferenceName, type ResolvedInferenceModel, resolveInferenceModel } from '../inference-names.js';
import { withPolicyTokenSpans } from '../policy-spans.js';
import { operation } from '../operations.js';
import type { RouteTable } from '../route-table.js';
import { readBody, type ServiceContext } from '../service-context.js';

/**
 * The `created` time of the base models in `GET /v1/models`, in unix seconds: 2026-11-21T00:00Z,
 * the day their definitions (architecture and seeded initial weights) were fixed. A constant, so
 * that a base model's entry is the same on every service and after every restart.
 */
const BASE_MODEL_CREATED = 1_795_219_200;

/** Registers `POST /v1/chat/completions` (with and without the trailing slash) and `GET /v1/models`. */
export function registerInferenceRoutes(routes: RouteTable, service: ServiceContext): void {
  const chatCompletions = async (context: Context): Promise<Response> => {
    // The document's body (`chatCompletionBody`) is this schema with `model` described.
    const request = await readBody(service, context, ChatCompletionRequestBody);
    const resolved = resolveInferenceModel(request.model, {
      store: service.store,
      baseModels: service.engine.baseModels(),
      dataDir: service.options.dataDir,
      defaultEntity: service.options.entity,
    });
    const result = await sample(service, resolved.policy, request, context.req.raw.signal);
    // The client hung up and the engine dropped its request: nobody is left to answer.
    if (result === undefined) return new Response(null, { status: 499 });
    return completionAnswer(context, request, resolved, result);
  };
  routes.add(operation('createChatCompletion'), chatCompletions);
  routes.add(operation('createChatCompletionTrailingSlash'), chatCompletions);

  routes.add(operation('listInferenceModels'), async (context) => context.json(inferenceModels(service)));
}

/**
 * Samples `request` from `policy` on the engine, stopped by whichever comes first: the client
 * hangs up (undefined: nobody to answer), the service's `requestTimeoutMs` passes or the service
 * stops (503 with `Retry-After`). The engine's errors become their HTTP answers.
 */
async function sample(
  service: ServiceContext,
  policy: PolicyRef,
  request: ChatCompletionRequestBody,
  client: AbortSignal,
): Promise<ChatCompletionResult | undefined> {
  // One signal for the engine, aborted by whichever comes first: the client hangs up, the
  // time limit passes, or the service stops. A plain timer and listeners removed afterwards:
  // AbortSignal.timeout/any would keep a timer and a link to the service's signal per request.
  const controller = new AbortController();
  let cause: 'client' | 'timeout' | 'stopping' | undefined;
  const abortFor = (reason: typeof cause) => (): void => {
    cause ??= reason;
    controller.abort(new Error(`The completion was stopped (${reason})`));
  };
  const onClient = abortFor('client');
  const onStopping = abortFor('stopping');
  if (client.aborted) onClient();
  if (service.stopping.aborted) onStopping();
  client.addEventListener('abort', onClient, { once: true });
  service.stopping.addEventListener('abort', onStopping, { once: true });
  const timer = setTimeout(abortFor('timeout'), service.options.requestTimeoutMs);
  try {
    // Logprobs are always fetched: they count each choice's tokens for its policy_token_spans.
    const engineRequest = request.logprobs === true ? request : { ...request, logprobs: true, top_logprobs: 0 };
    return await service.engine.chatCompletion(policy, engineRequest, { signal: controller.signal });
  } catch (error) {
    if (cause === 'client') return undefined;
    throw completionError(service, error, cause, policy, request.model);
  } finally {
    clearTimeout(timer);
    client.removeEventListener('abort', onClient);
    service.stopping.removeEventListener('abort', onStopping);
  }
}

/** What a failed completion answers: why it was stopped (`cause`), or the engine's error as HTTP. */
function completionError(
  service: ServiceContext,
  error: unknown,
  cause: 'timeout' | 'stopping' | undefined,
  policy: PolicyRef,
  model: string,
): unknown {
  if (cause === 'stopping')
    return new HttpError(503, 'The service stopped before the completion finished; try again when it is back', {
      'retry-after': '5',
    });
  if (cause === 'timeout') {
    return new HttpError(
      503,
      `The completion did not finish within ${service.options.requestTimeoutMs} ms (the service's requestTimeoutMs): the engine is busy or stuck; try again later`,
      { 'retry-after': '5' },
    );
  }
  if (error instanceof EngineUnavailableError) return new HttpError(503, error.message, { 'retry-after': '5' });
  if (error instanceof EngineInputError) {
    if (error.status !== 422) return new HttpError(error.status, error.message);
    return new RequestValidationError([
      { loc: error.loc.length > 0 ? [...error.loc] : ['body'], msg: error.message, type: 'value_error' },
    ]);
  }
  // The checkpoint was deleted while the completion waited for its weights.
  if (policy.checkpointPath !== null && !existsSync(policy.checkpointPath)) {
    return new HttpError(
      404,
      `Model ${JSON.stringify(model)} not found: its checkpoint was deleted while the completion was waiting`,
    );
  }
  return error;
}

/** The completion's answer: one JSON body, or a `text/event-stream` of chunks when `stream` is set. */
function completionAnswer(
  context: Context,
  request: ChatCompletionRequestBody,
  resolved: ResolvedInferenceModel,
  result: ChatCompletionResult,
): Response {
  const { policy, model, step } = resolved;
  const identity = {
    id: `chatcmpl-${randomUUID().replaceAll('-', '')}`,
    created: Math.floor(Date.now() / 1000),
    model: request.model,
  };
  const choices = withPolicyTokenSpans(result.choices, {
    completionId: identity.id,
    step,
    slot: model === undefined ? policy.baseModel : inferenceName(model, step),
    keepLogprobs: request.logprobs === true,
  });
  if (request.stream === true) {
    const chunks = completionChunks(identity, { ...result, choices }, request.stream_options?.include_usage === true);
    return new Response(eventStream(chunks), {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
      },
    });
  }
  const body: ChatCompletionResponseBody = {
    ...identity,
    object: 'chat.completion',
    choices,
    usage: result.usage,
    system_fingerprint: null,
  };
  return context.json(body);
}

/** `GET /v1/models`: the base models, then each trained model as itself, at step 0 and at each checkpoint. */
function inferenceModels(service: ServiceContext): InferenceModelList {
  const data: InferenceModel[] = service.engine
    .baseModels()
    .map((id) => ({ id, object: 'model', created: BASE_MODEL_CREATED, owned_by: 'policyloop', root: id }));
  for (const model of service.store.models.all()) {
    const created = Math.floor(Date.parse(model.created_at) / 1000);
    data.push({ id: inferenceName(model), object: 'model', created, owned_by: model.entity, root: model.base_model });
    data.push({
      id: inferenceName(model, 0),
      object: 'model',
      created,
      owned_by: model.entity,
      root: model.base_model,
    });
    for (const checkpoint of service.store.checkpoints.all(model.id)) {
      data.push({
        id: inferenceName(model, checkpoint.step),
        object: 'model',
        created: Math.floor(Date.parse(checkpoint.created_at) / 1000),
        owned_by: model.entity,
        root: model.base_model,
      });
    }
  }
  return { object: 'list', data };
}
