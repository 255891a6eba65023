/**
 * The two OpenAPI documents of the wire contract, loaded into one ajv (JSON Schema 2020-12 with
 * ajv-formats), and the map from our zod schema names to the JSON schema each document gives
 * for the same type.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { SchemaName } from './corpus/index.js';

/** File names of the two documents (vendored in `docs/api/`, equal to `../shared/api/` in the project workspace). */
export const documentNames = ['openapi.json', 'openapi.latest.json'] as const;
/** One of the two documents. */
export type DocumentName = (typeof documentNames)[number];

/** Directory of the vendored copies. */
export const contractDirectory = new URL('../../docs/api/', import.meta.url);

interface OpenApiDocument {
  components: { schemas: Record<string, JsonSchema> };
}
/** A JSON schema as the documents write it (only the keys the structural checks read). */
export interface JsonSchema {
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  [key: string]: unknown;
}

/** The parsed documents. */
export const documents = Object.fromEntries(
  documentNames.map((name) => [
    name,
    JSON.parse(readFileSync(new URL(name, contractDirectory), 'utf8')) as OpenApiDocument,
  ]),
) as Record<DocumentName, OpenApiDocument>;

// ajv-formats is CommonJS: under NodeNext the default import is `module.exports`, whose
// `default` is the plugin.
const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
for (const name of documentNames) ajv.addSchema(documents[name], name);

/** The string formats ajv checks (with `strict: false`, an unknown one would be ignored silently). */
export const knownFormats: ReadonlySet<string> = new Set(Object.keys(ajv.formats));

/**
 * How a zod schema relates to the document's schema: `same` (must agree on every instance) or
 * `narrower` (our schema is a typed refinement of a deliberately loose document schema: whatever
 * we accept the document must accept, not the reverse).
 */
export type Relation = 'same' | 'narrower';

/** The JSON schema a document gives for one of our zod schemas. */
export interface Target {
  /** JSON pointer into the document, e.g. `#/components/schemas/Trajectory`; several: any of them. */
  pointer: string | readonly string[];
  relation: Relation;
}

const component = (name: string): string => `#/components/schemas/${name}`;

/**
 * Targets that are not the same-named component. `null`: the document has no schema for it.
 * Pointers into a component (e.g. `MessageOrChoice`) name the exact sub-schema the document uses.
 */
const explicitTargets: Partial<Record<SchemaName, Partial<Record<DocumentName, Target | null>>>> = {
  CheckpointPage: bothSame(component('PaginatedResponse_CheckpointResponse_')),
  TrainingJobEventPage: bothSame(component('PaginatedResponse_TrainingJobEventResponse_')),
  // Components named after JavaScript/DOM globals (`File`, `Audio`, `History`) are exported under other names.
  ChatCompletionContentPartFileParam: bothSame(component('File')),
  AudioReference: bothSame(component('Audio')),
  AdditionalHistory: {
    'openapi.json': same(component('History')),
    'openapi.latest.json': same(component('LegacyHistory')),
  },
  TokenLogprob: bothSame(component('ChatCompletionTokenLogprob')),
  TrajectoryException: { 'openapi.json': null, 'openapi.latest.json': same(component('PydanticException')) },
  MessageOrChoice: bothSame(`${component('Trajectory')}/properties/messages_and_choices/items`),
  Metrics: bothSame(`${component('Trajectory')}/properties/metrics`),
  ChatCompletionContentPart: bothSame(
    `${component('ChatCompletionUserMessageParam')}/properties/content/anyOf/1/items`,
  ),
  ChatCompletionMessageToolCall: bothSame(`${component('ChatCompletionMessage')}/properties/tool_calls/anyOf/0/items`),
  // The document has no union of the six message params of its own: any of them.
  ChatCompletionMessageParam: bothSame(
    ['Developer', 'System', 'User', 'Assistant', 'Tool', 'Function'].map((role) =>
      component(`ChatCompletion${role}MessageParam`),
    ),
  ),
  FinishReason: bothSame(`${component('Choice')}/properties/finish_reason`),
  Uuid: bothSame(`${component('ModelResponse')}/properties/id`),
  SFTMetricLoggingConfig: {
    'openapi.json': same(`${component('SFTTrainingConfig')}/properties/metric_logging/anyOf/0`),
    'openapi.latest.json': same(component('SFTMetricLoggingConfig')),
  },
  SFTExperimentalTrainingConfig: {
    'openapi.json': same(`${component('CreateSFTTrainingJob')}/properties/experimental_config/anyOf/0`),
    'openapi.latest.json': same(component('SFTExperimentalTrainingConfig')),
  },
  TrainingJobDetails: {
    'openapi.json': { pointer: component('TrainingJobResponse'), relation: 'narrower' },
    'openapi.latest.json': same(component('TrainingJobResponse')),
  },
  BaseModelList: {
    'openapi.json': null,
    'openapi.latest.json': same(
      '#/paths/~1v1~1preview~1base-models/get/responses/200/content/application~1json/schema',
    ),
  },
  ChatCompletionRequestBody: bothSame(component('ChatCompletionRequest'), 'narrower'),
  ChatCompletionResponseBody: bothSame(component('ChatCompletionResponse'), 'narrower'),
  ChatCompletionResult: bothSame(component('ChatCompletionResponse'), 'narrower'),
  TrainingStartedData: bothSame(`${component('TrainingJobEventResponse')}/properties/data`, 'narrower'),
  GradientStepData: bothSame(`${component('TrainingJobEventResponse')}/properties/data`, 'narrower'),
  TrainingFailedData: bothSame(`${component('TrainingJobEventResponse')}/properties/data`, 'narrower'),
};

function same(pointer: string | readonly string[]): Target {
  return { pointer, relation: 'same' };
}

function bothSame(pointer: string | readonly string[], relation: Relation = 'same'): Record<DocumentName, Target> {
  return { 'openapi.json': { pointer, relation }, 'openapi.latest.json': { pointer, relation } };
}

/** The document's schema for our zod schema `name`, or `null` when it has none. */
export function targetOf(name: SchemaName, document: DocumentName): Target | null {
  const explicit = explicitTargets[name];
  if (explicit && document in explicit) return explicit[document] ?? null;
  return name in documents[document].components.schemas ? same(component(name)) : null;
}

const validators = new Map<string, ValidateFunction>();

/** A compiled validator of the schema at `pointer` (any of the pointers) in `document`. */
export function validatorOf(document: DocumentName, pointer: string | readonly string[]): ValidateFunction {
  const pointers = typeof pointer === 'string' ? [pointer] : pointer;
  const key = pointers.map((each) => `${document}${each}`).join(' | ');
  let validate = validators.get(key);
  if (!validate) {
    const refs = pointers.map((each) => ({ $ref: `${document}${each}` }));
    validate = ajv.compile(refs.length === 1 ? refs[0]! : { anyOf: refs });
    validators.set(key, validate);
  }
  return validate;
}

/** The raw JSON schema at `#/components/schemas/<name>` of `document`, if any. */
export function componentOf(document: DocumentName, name: string): JsonSchema | undefined {
  return documents[document].components.schemas[name];
}
