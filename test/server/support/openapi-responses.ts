/**
 * Checks responses against the response schemas of both OpenAPI documents (`docs/api/`) and of
 * the service's own document (`GET /openapi.json`)
 * (ajv, JSON Schema 2020-12 with formats): each document is added whole, and each operation's
 * response schema is compiled by reference, so `$ref`s to components resolve.
 */
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { buildOpenApiDocument } from '../../../src/server/openapi.js';
import { resolveTrainingDataAccess } from '../../../src/server/training-data-access.js';

/** The two contract documents. */
export const DOCUMENT_NAMES = ['openapi.json', 'openapi.latest.json'] as const;
type DocumentName = (typeof DOCUMENT_NAMES)[number];

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}

const API_DIRECTORY = new URL('../../../docs/api/', import.meta.url);
const documents = Object.fromEntries(
  DOCUMENT_NAMES.map((name) => [name, JSON.parse(readFileSync(new URL(name, API_DIRECTORY), 'utf8')) as Document]),
) as Record<DocumentName, Document>;

const addFormats = addFormatsModule.default;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
for (const name of DOCUMENT_NAMES) ajv.addSchema(documents[name], name);

const compiled = new Map<string, ValidateFunction>();

function pointerEscape(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** The document's path template matching a concrete path (`{param}` matches one segment). */
function findTemplate(document: Document, path: string): string | undefined {
  for (const template of Object.keys(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (pattern.test(path)) return template;
  }
  return undefined;
}

/**
 * Every `document METHOD template status` that declares a JSON response schema, e.g.
 * `openapi.json POST /v1/preview/models 200`: what a test run must have checked.
 */
export function declaredResponses(status: number): string[] {
  const declared: string[] = [];
  for (const name of DOCUMENT_NAMES) {
    for (const [template, operations] of Object.entries(documents[name].paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (operation.responses[String(status)]?.content?.['application/json']?.schema !== undefined)
          declared.push(`${name} ${method.toUpperCase()} ${template} ${status}`);
      }
    }
  }
  return declared;
}

/** The result of checking one response against one document. */
export interface ContractCheck {
  readonly document: DocumentName;
  /** `document METHOD template status`, as listed by {@link declaredResponses} (set when checked). */
  readonly operation?: string;
  /** False when the document has no schema for this operation and status (nothing to check). */
  readonly checked: boolean;
  readonly errors: string[];
}

/**
 * Validates a JSON response body against the schema each document declares for the operation
 * (`method` + concrete `path`) and `status`. Operations or statuses a document does not declare
 * are reported as unchecked.
 */
export function checkResponse(method: string, path: string, status: number, body: unknown): ContractCheck[] {
  return DOCUMENT_NAMES.map((name) => {
    const document = documents[name];
    const template = findTemplate(document, path);
    const operation = template === undefined ? undefined : document.paths[template]?.[method.toLowerCase()];
    const response = operation?.responses[String(status)];
    if (template === undefined || response?.content?.['application/json']?.schema === undefined)
      return { document: name, checked: false, errors: [] };
    const pointer = `${name}#/paths/${pointerEscape(template)}/${method.toLowerCase()}/responses/${status}/content/${pointerEscape('application/json')}/schema`;
    let validate = compiled.get(pointer);
    if (validate === undefined) {
      validate = ajv.compile({ $ref: pointer });
      compiled.set(pointer, validate);
    }
    const valid = validate(body);
    return {
      document: name,
      checked: true,
      operation: `${name} ${method.toUpperCase()} ${template} ${status}`,
      errors: valid ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message ?? ''}`),
    };
  });
}

/**
 * The service's own document (`GET /openapi.json`), as `buildOpenApiDocument` writes it: every
 * answer a test gets is checked against its schema for the operation and status too. Its answer
 * schemas do not depend on the service (only request schemas do: the base models, the training
 * data URLs), so one document serves every test.
 */
const ownDocument = buildOpenApiDocument(
  { baseModels: ['policyloop/tiny-chat'], trainingData: resolveTrainingDataAccess({ dataDir: tmpdir() }) },
  { version: '0.0.0' },
) as unknown as Document;
const ownAjv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ownAjv);
ownAjv.addSchema(ownDocument, 'own');
const ownCompiled = new Map<string, ValidateFunction>();

/**
 * Validates a JSON answer against the service's own document: the schema of `application/json`
 * for the operation and status (a `$ref` to `components/responses` followed). Returns the errors
 * (empty when it fits), or undefined when the document has no JSON schema there (an undeclared
 * status: no route answers one but 500, which the tests fail on otherwise).
 */
export function checkOwnResponse(method: string, path: string, status: number, body: unknown): string[] | undefined {
  const template = findTemplate(ownDocument, path);
  const operation = template === undefined ? undefined : ownDocument.paths[template]?.[method.toLowerCase()];
  let response = operation?.responses[String(status)] as
    | { $ref?: string; content?: Record<string, { schema?: unknown }> }
    | undefined;
  let pointer = `own#/paths/${pointerEscape(template ?? '')}/${method.toLowerCase()}/responses/${status}`;
  if (response?.$ref !== undefined) {
    const name = response.$ref.replace('#/components/responses/', '');
    pointer = `own#/components/responses/${name}`;
    response = (ownDocument as unknown as { components: { responses: Record<string, typeof response> } }).components
      .responses[name];
  }
  if (template === undefined || response?.content?.['application/json']?.schema === undefined) return undefined;
  pointer += `/content/${pointerEscape('application/json')}/schema`;
  let validate = ownCompiled.get(pointer);
  if (validate === undefined) {
    validate = ownAjv.compile({ $ref: pointer });
    ownCompiled.set(pointer, validate);
  }
  return validate(body) ? [] : (validate.errors ?? []).map((error) => `${error.instancePath} ${error.message ?? ''}`);
}
