/**
 * Field by field, each object schema against its component in both OpenAPI documents: the same
 * property names, the same required fields, the same nullable fields, and `additionalProperties`
 * honoured (closed objects reject unknown keys, open ones keep them). Also checks that the corpus
 * covers every schema and that every component of the contract has a zod schema.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as api from '../../src/schema/api.js';
import * as chat from '../../src/schema/chat.js';
import * as choice from '../../src/schema/choice.js';
import * as messages from '../../src/schema/messages.js';
import * as page from '../../src/schema/page.js';
import * as trajectory from '../../src/schema/trajectory.js';
import { corpus, type SchemaName } from './corpus/index.js';
import {
  componentOf,
  documentNames,
  documents,
  targetOf,
  validatorOf,
  type DocumentName,
} from './contract-documents.js';

/** The zod schemas of the modules this test owns (metrics.ts has none). */
const ownSchemas = (
  Object.entries({ ...messages, ...choice, ...trajectory, ...page, ...api, ...chat }) as Array<[string, unknown]>
).filter((entry): entry is [SchemaName, z.ZodType] => entry[1] instanceof z.ZodType);

/** Required-ness that differs on purpose (see `docs/schema.md`). */
const requiredDifferences: Array<{ schema: SchemaName; document: DocumentName; fields: string[]; reason: string }> = [
  {
    schema: 'TrainingJobResponse',
    document: 'openapi.latest.json',
    fields: [
      'model_id',
      'status',
      'progress',
      'error_message',
      'training_start',
      'training_end',
      'created_at',
      'updated_at',
    ],
    reason: 'a client must also accept the older {id}; TrainingJobDetails is the strict full form',
  },
  {
    schema: 'TrajectoryGroup',
    document: 'openapi.latest.json',
    fields: ['trajectories'],
    reason: 'the primary contract requires trajectories',
  },
];

/** Schemas we close although the document leaves them open (see `docs/schema.md`). */
const closedDifferences: Array<{ schema: SchemaName; document: DocumentName; reason: string }> = [
  { schema: 'SFTTrainingConfig', document: 'openapi.json', reason: 'the newer document closes the SFT schemas' },
  { schema: 'CreateSFTTrainingJob', document: 'openapi.json', reason: 'the newer document closes the SFT schemas' },
];

/** Keys we accept that neither document declares, each sent by real clients. */
const undeclaredKeys: Partial<Record<SchemaName, string[]>> = {
  LogRequest: ['model_id'], // OpenPipe ART repeats the path's model id in the body
  // The local engine's LoRA options for Hugging Face base models (docs/engine.md).
  ExperimentalTrainingConfig: ['lora_rank', 'lora_alpha', 'lora_target_modules'],
  SFTTrainingConfig: ['lora_rank', 'lora_alpha', 'lora_target_modules'],
};

/** Components that no zod schema targets directly, and why that is fine. */
const componentsCoveredIndirectly: Record<string, string> = {
  openai__types__chat__chat_completion_assistant_message_param__FunctionCall:
    'the `function_call` of ChatCompletionAssistantMessageParam',
  openai__types__chat__chat_completion_message_custom_tool_call_param__Custom:
    'the `custom` of ChatCompletionMessageCustomToolCallParam',
  Function:
    'the `function` of ChatCompletionMessageFunctionToolCall: the same shape as FunctionCall, whose corpus covers it',
  openai__types__chat__chat_completion_message_function_tool_call_param__Function:
    'the `function` of ChatCompletionMessageFunctionToolCallParam',
};

interface FieldCheck {
  name: SchemaName;
  schema: z.ZodObject;
  document: DocumentName;
  componentName: string;
}

/** Object schemas whose target is a whole component (not a pointer into one). */
const fieldChecks: FieldCheck[] = ownSchemas.flatMap(([name, schema]) =>
  documentNames.flatMap((document) => {
    const target = targetOf(name, document);
    const match = typeof target?.pointer === 'string' ? /^#\/components\/schemas\/([^/]+)$/.exec(target.pointer) : null;
    if (!match?.[1] || target?.relation !== 'same' || !(schema instanceof z.ZodObject)) return [];
    if (!componentOf(document, match[1])?.properties) return [];
    return [{ name, schema, document, componentName: match[1] }];
  }),
);

function firstValidInstance(name: SchemaName): Record<string, unknown> {
  const found = corpus.find((testCase) => testCase.schema === name && testCase.valid);
  if (!found) throw new Error(`Expected a valid corpus instance of ${name}, found none`);
  return found.value as Record<string, unknown>;
}

describe('field structure against the documents', () => {
  it('covers the object schemas of both documents', () => {
    expect(fieldChecks.length).toBeGreaterThan(80);
  });

  it.each(fieldChecks.map((check) => [`${check.name} ~ ${check.document}#${check.componentName}`, check] as const))(
    '%s',
    (_label, { name, schema, document, componentName }) => {
      const component = componentOf(document, componentName)!;
      const properties = Object.keys(component.properties ?? {});
      const shape = schema.shape as Record<string, z.ZodType>;
      const pointer = `#/components/schemas/${componentName}`;
      for (const property of properties) {
        const field = shape[property];
        expect(field, `${name} lacks the field ${property}`).toBeDefined();
        if (!field) continue;
        const documentTakesNull = validatorOf(document, `${pointer}/properties/${property}`)(null);
        expect(field.safeParse(null).success, `${name}.${property} nullable`).toBe(documentTakesNull);
        const excused = requiredDifferences.some(
          (row) => row.schema === name && row.document === document && row.fields.includes(property),
        );
        const documentRequires = component.required?.includes(property) ?? false;
        const zodRequires = !field.safeParse(undefined).success;
        if (excused)
          expect(zodRequires, `${name}.${property} listed as a required-ness difference`).not.toBe(documentRequires);
        else expect(zodRequires, `${name}.${property} required`).toBe(documentRequires);
      }

      const extra = { ...firstValidInstance(name), x_unknown_key: 1 };
      const parsed = schema.safeParse(extra);
      const closedOnPurpose = closedDifferences.some((row) => row.schema === name && row.document === document);
      if (component.additionalProperties === false || closedOnPurpose) {
        expect(parsed.success, `${name} rejects unknown keys`).toBe(false);
        if (closedOnPurpose)
          expect(component.additionalProperties, `${name} listed as closed on purpose`).not.toBe(false);
      } else {
        expect(parsed.success, `${name} takes unknown keys`).toBe(true);
        if (component.additionalProperties === true)
          expect(parsed.data, `${name} keeps unknown keys`).toHaveProperty('x_unknown_key', 1);
      }
    },
  );

  it('declares no field that neither document has, but for keys real clients send', () => {
    const byName = new Map<SchemaName, Set<string>>();
    for (const { name, document, componentName } of fieldChecks) {
      const declared = byName.get(name) ?? new Set(undeclaredKeys[name] ?? []);
      for (const property of Object.keys(componentOf(document, componentName)?.properties ?? {}))
        declared.add(property);
      byName.set(name, declared);
    }
    for (const { name, schema } of fieldChecks) {
      const declared = byName.get(name)!;
      expect(
        Object.keys(schema.shape).filter((key) => !declared.has(key)),
        name,
      ).toEqual([]);
    }
  });
});

describe('coverage', () => {
  it('the corpus has valid and invalid instances of every exported schema', () => {
    const aliases = new Set<SchemaName>(['TokenLogprob', 'TrajectoryException']);
    for (const [name] of ownSchemas) {
      const verdicts = new Set(corpus.filter((testCase) => testCase.schema === name).map((testCase) => testCase.valid));
      expect([name, [...verdicts].sort()], `corpus instances of ${name}`).toEqual([
        name,
        aliases.has(name) ? [true] : [false, true],
      ]);
    }
  });

  it.each(documentNames)('%s: the `Function` component, exported as FunctionCall, has its shape', (document) => {
    const shape = (name: string) => {
      const { properties, required, additionalProperties, type } = componentOf(document, name) ?? {};
      return { properties, required: [...(required ?? [])].sort(), additionalProperties, type };
    };
    expect(shape('Function')).toEqual(shape('FunctionCall'));
  });

  it.each(documentNames)('every component of %s is the target of a zod schema', (document) => {
    const targeted = new Set<string>();
    for (const [name] of ownSchemas) {
      const target = targetOf(name, document);
      const pointers = typeof target?.pointer === 'string' ? [target.pointer] : (target?.pointer ?? []);
      for (const pointer of pointers) {
        const match = /^#\/components\/schemas\/([^/]+)$/.exec(pointer);
        if (match?.[1]) targeted.add(match[1]);
      }
    }
    const missing = Object.keys(documents[document].components.schemas).filter(
      (component) => !targeted.has(component) && !(component in componentsCoveredIndirectly),
    );
    expect(missing).toEqual([]);
  });
});
