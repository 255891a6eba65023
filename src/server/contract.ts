/**
 * The service's own rules on top of the wire schemas, as zod schemas: the routes validate requests
 * with them, and the service's OpenAPI document (`GET /openapi.json`) is generated from the same
 * objects, so what the document says and what the service accepts cannot drift apart. Rules that
 * depend on the running service (the base models it serves, where SFT data may be read from) are
 * built from a {@link ContractContext}.
 */
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { CONTROL_CHARACTER_RANGES, escapeControl } from '../internal/control-characters.js';
import {
  ChatCompletionAssistantMessageParam,
  ChatCompletionContentPartTextParam,
  ChatCompletionDeveloperMessageParam,
  ChatCompletionFunctionMessageParam,
  ChatCompletionMessageToolCall,
  ChatCompletionRequestBody,
  ChatCompletionSystemMessageParam,
  ChatCompletionToolMessageParam,
  ChatCompletionUserMessageParam,
  CreateSFTTrainingJob,
  CreateTrainingJob,
  ExperimentalTrainingConfig,
  LogRequest,
  ModelCreate,
  ValidationError,
} from '../schema/index.js';
import type { TrainingDataAccess } from './training-data-access.js';

/** What the service-dependent rules depend on. */
export interface ContractContext {
  /** The base models the engine serves now (`GET /v1/preview/base-models`). */
  readonly baseModels: readonly string[];
  /** Why an id is not a served base model (where the engine looked, which folder it refused). */
  readonly describeMissingBaseModel?: ((id: string) => string) | undefined;
  /** What SFT training data URLs may reach. */
  readonly trainingData: TrainingDataAccess;
  /** The RL losses the engine trains with. @default the local engine's (`cispo`, `ppo`) */
  readonly lossFns?: readonly string[] | undefined;
}

/**
 * A string without control characters (C0, DEL, C1, bidirectional overrides): `\uXXXX` escapes
 * only, so that ECMAScript, Python and Rust read the pattern alike.
 */
export const NO_CONTROL_CHARACTER = new RegExp(`^[^${CONTROL_CHARACTER_RANGES}]*$`);

/**
 * A name segment without '/', ':' or white space (JavaScript's `\s`, spelled out): either would make
 * an inference name (`wandb-artifact:///entity/project/name:stepN`) ambiguous.
 */
export const NO_NAME_SEPARATOR =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the white space it refuses
  /^[^/:\u0009-\u000d\u0020\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*$/;

/** The message of a name holding a control character (shown escaped, at most 200 characters). */
export function controlCharacterMessage(field: string, value: string): string {
  return `Expected a ${field} without control characters (such as ESC, BEL or backspace), got "${escapeControl(value.length > 200 ? `${value.slice(0, 200)}...` : value)}"`;
}

/** An entity, project or model name as the service takes it: non-empty, no control characters, no '/', ':' or spaces. */
export function nameSegment(field: string) {
  return z
    .string()
    .min(1, { error: `Expected a non-empty ${field}` })
    .regex(NO_CONTROL_CHARACTER, {
      error: (issue) => controlCharacterMessage(field, String(issue.input)),
    })
    .regex(NO_NAME_SEPARATOR, {
      error: (issue) => `Expected a ${field} without '/', ':' or spaces, got ${JSON.stringify(issue.input)}`,
    });
}

/**
 * The body of `POST /v1/preview/models` as this service takes it: the contract's `ModelCreate`,
 * with names as {@link nameSegment} and `base_model` one of the served base models.
 */
export function registerModelBody(context: ContractContext) {
  const served = context.baseModels;
  return ModelCreate.extend({
    entity: nameSegment('entity').nullable().optional(),
    project: nameSegment('project'),
    name: nameSegment('name'),
    base_model: z.enum(served as [string, ...string[]], {
      error: (issue) => {
        if (typeof issue.input !== 'string') return `Expected a base model id (a string), got ${typeof issue.input}`;
        const why = context.describeMissingBaseModel?.(issue.input);
        return `Unknown base model ${JSON.stringify(issue.input)}; expected one of: ${served.join(', ')}${why === undefined ? '' : `. ${why}`}`;
      },
    }),
  });
}

/** The losses of an engine that names none: the local engine's, the hosted contract's. */
const LOCAL_ENGINE_LOSSES: readonly string[] = ['cispo', 'ppo'];

/**
 * The body of `POST /v1/preview/training-jobs` as this service takes it: the contract's
 * `CreateTrainingJob`, with `experimental_config.loss_fn` one of the engine's losses (a Tinker
 * server's `importance_sampling` and `dro` besides `cispo` and `ppo`), refused naming the loss.
 */
export function rlJobBody(context: ContractContext) {
  const offered = context.lossFns ?? LOCAL_ENGINE_LOSSES;
  // An enum (not a refined string), so that the service's own OpenAPI document lists the losses
  // this engine takes and a schema-valid request is never refused.
  const lossFn = z
    .enum(offered as [string, ...string[]], {
      error: (issue) =>
        `This service's engine trains with no loss ${JSON.stringify(issue.input)}; expected one of: ${offered.join(', ')}`,
    })
    .nullable()
    .optional();
  return CreateTrainingJob.extend({
    experimental_config: ExperimentalTrainingConfig.extend({ loss_fn: lossFn }).nullable().optional(),
  });
}

/** A log request's `split`: any string without control characters. */
export const LogSplit = z.string().regex(NO_CONTROL_CHARACTER, {
  error: (issue) => controlCharacterMessage('split', String(issue.input)),
});

/** The body of `POST /v1/preview/models/{model_id}/log` as this service takes it (`split` as {@link LogSplit}). */
export const LogBody = LogRequest.extend({ split: LogSplit });

/**
 * A chat message as the local engines read it: text only (a user's content parts are text parts;
 * image, audio and file parts are answered 422 by the engine), and an assistant message's
 * `tool_calls` may be `null` (a response message echoed back; the route drops it).
 */
const LocalChatMessage = z.discriminatedUnion('role', [
  ChatCompletionDeveloperMessageParam,
  ChatCompletionSystemMessageParam,
  ChatCompletionUserMessageParam.extend({
    content: z.union([z.string(), z.array(ChatCompletionContentPartTextParam)]),
  }),
  ChatCompletionAssistantMessageParam.extend({
    tool_calls: z.array(ChatCompletionMessageToolCall).nullable().optional(),
  }),
  ChatCompletionToolMessageParam,
  ChatCompletionFunctionMessageParam,
]);

/**
 * The body of a chat completion as the document shows it: `ChatCompletionRequestBody`, what the
 * route validates with (built once: completions are the busiest route), with `model` described
 * (the first served base model as its example) and `messages` as the local engines read them
 * ({@link LocalChatMessage}: the route takes every content part and the engine refuses the ones
 * it cannot read, with the same 422).
 */
export function chatCompletionBody(context: ContractContext) {
  return ChatCompletionRequestBody.extend({
    model: ChatCompletionRequestBody.shape.model.meta({
      description:
        'A base model id (`GET /v1/preview/base-models`) or a trained model: `wandb-artifact:///<entity>/<project>/<name>` (newest checkpoint) or `...:step<N>`; also `<entity>/<project>/<name>`, `<project>/<name>` or `<name>` when that names exactly one model. Anything else is a 404.',
      examples: context.baseModels.slice(0, 1),
    }),
    messages: z.array(LocalChatMessage).min(1),
  });
}

/**
 * The body of `POST /v1/preview/sft-training-jobs` as this service takes it: the contract's
 * closed schema, with `training_data_url` documented by the forms this service reads (see
 * {@link trainingDataUrlPattern}; the service checks it with `checkTrainingDataUrl`).
 */
export function sftJobBody(context: ContractContext) {
  return CreateSFTTrainingJob.extend({
    training_data_url: CreateSFTTrainingJob.shape.training_data_url.meta({
      description: trainingDataUrlDescription(context.trainingData),
      pattern: trainingDataUrlPattern(context.trainingData),
    }),
  });
}

/**
 * A percent escape the pattern admits: printable ASCII but '.', '/' and DEL (an escaped '.' or '/'
 * could step out of the folder; an escaped byte beyond ASCII may not be UTF-8, which a file path
 * must be). Characters beyond ASCII are written as they are: the URL parser escapes them itself.
 */
const ESCAPE = '%(?:2[0-9A-Da-d]|[3-6][0-9A-Fa-f]|7[0-9A-Ea-e])';
/** One path segment: no '.' to start it (no `.` or `..`), no '/', '\\', '?', '#' or control characters. */
const SEGMENT = `(?:[^/?#%.\\\\\\u0000-\\u001f\\u007f]|${ESCAPE})(?:[^/?#%\\\\\\u0000-\\u001f\\u007f]|${ESCAPE})*`;
/** A host name whose last label starts with a letter (so never an IP address literal). */
const HOST_NAME = '(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The `file://` path of a directory, as `pathToFileURL` writes it (no trailing slash). */
function directoryUrlPath(directory: string): string {
  return pathToFileURL(directory).pathname.replace(/\/+$/, '');
}

/**
 * A regular expression (ECMAScript, Python and Rust alike) of the training data URLs that this
 * service takes at submission: `data:` URLs; `file://` URLs of its data directory's SFT files
 * (`<dataDir>/<project>/models/<name>/sft-data/...`) and of files under its training data roots,
 * written plainly (no `.` or `..` segments, no encoded '/'); with downloads on, `http(s)://` URLs
 * of host names. (The service also takes a few other spellings of the same URLs, such as an
 * upper-case scheme; see docs/api/README.md.)
 */
export function trainingDataUrlPattern(access: TrainingDataAccess): string {
  const forms = ['[dD][aA][tT][aA]:[\\s\\S]*'];
  const file = (directory: string, rest: string) =>
    `file://(?:localhost)?${escapeRegExp(directoryUrlPath(directory))}${rest}`;
  forms.push(file(access.dataDir, `/${SEGMENT}/models/${SEGMENT}/sft-data(?:/${SEGMENT})+`));
  for (const root of access.roots) forms.push(file(root, `(?:/${SEGMENT})+`));
  if (access.downloads) forms.push(`https?://${HOST_NAME}(?::[1-9][0-9]{0,3})?(?:[/?#][^\\s]*)?`);
  return `^(?:${forms.join('|')})$`;
}

function trainingDataUrlDescription(access: TrainingDataAccess): string {
  const roots = access.roots.length === 0 ? 'none' : access.roots.join(', ');
  return (
    'Where the JSONL rows (`{"messages": [...], "tools"?: [...]}`) are: a `data:` URL (base64 or percent-encoded); ' +
    `a \`file://\` URL of this service's SFT files (${access.dataDir}/<project>/models/<name>/sft-data/) or of a file under a training data root (${roots}); ` +
    (access.downloads
      ? 'or an `http(s)://` URL, which is never downloaded from loopback, private, link-local or reserved addresses unless allowed. '
      : 'http(s):// downloads are off in this service (--allow-training-data-downloads). ') +
    'Anything else is a 422 (`url_parsing`, `url_scheme` or `url_refused`) naming the reason. The rows are read when the job runs: a file that cannot be read, or a line that is not a row, fails the job.'
  );
}

/** The body of every error answer but 422: FastAPI's `detail` plus an OpenAI-style `error`. */
export const ErrorResponse = z.object({
  detail: z.string(),
  error: z.object({ message: z.string(), type: z.string(), code: z.int() }),
});
export type ErrorResponse = z.infer<typeof ErrorResponse>;

/** The body of a 422: FastAPI's `detail` list plus an OpenAI-style `error`. */
export const ValidationErrorResponse = z.object({
  detail: z.array(ValidationError).min(1),
  error: z.object({ message: z.string(), type: z.literal('invalid_request_error'), code: z.literal(422) }),
});
export type ValidationErrorResponse = z.infer<typeof ValidationErrorResponse>;

/** Response of `GET /v1/health`. */
export const HealthResponse = z.object({ status: z.literal('ok') });
export type HealthResponse = z.infer<typeof HealthResponse>;

/**
 * Response of the log route: the model, the split, the model's step and the step's metrics
 * computed from the groups, prefixed with the split (`train/reward`).
 */
export const LogResponse = z.object({
  model_id: z.guid(),
  split: z.string(),
  step: z.int().min(0),
  metrics: z.record(z.string(), z.number()),
});
export type LogResponse = z.infer<typeof LogResponse>;
