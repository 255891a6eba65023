/**
 * Conformance of the zod schemas with the wire contract: every corpus instance is checked by our
 * zod schema and, through ajv, by the same type's JSON schema in both OpenAPI documents. They must
 * agree (accept vs reject) except for the deliberate differences listed below, which
 * `docs/schema.md` explains.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import * as schemaModule from 'policyloop/schema';
import { corpus, type CorpusCase, type SchemaName } from './corpus/index.js';
import {
  contractDirectory,
  documentNames,
  documents,
  knownFormats,
  targetOf,
  validatorOf,
  type DocumentName,
} from './contract-documents.js';

/** Instances of a schema on which zod and one document disagree on purpose, and why. */
interface DeliberateDifference {
  schema: SchemaName;
  document: DocumentName;
  /** Corpus case ids. */
  ids: string[];
  reason: string;
}

const OLD: DocumentName = 'openapi.json';
const LATEST: DocumentName = 'openapi.latest.json';

/** Keep short: fix the zod schema instead when it is simply wrong. Explained in `docs/schema.md`. */
const deliberateDifferences: DeliberateDifference[] = [
  // The two documents disagree; we follow the newer one where it adds or closes, the older where it is the primary contract.
  {
    schema: 'SFTTrainingConfig',
    document: OLD,
    ids: [
      'SFTTrainingConfig/unknown-key',
      'SFTTrainingConfig/metric-logging-unknown-key',
      'SFTTrainingConfig/assistant-turns-first',
    ],
    reason: 'latest closes the SFT config and declares assistant_turns; the older leaves it open',
  },
  {
    schema: 'SFTMetricLoggingConfig',
    document: OLD,
    ids: [
      'SFTMetricLoggingConfig/unknown-key',
      'SFTMetricLoggingConfig/step-zero',
      'SFTMetricLoggingConfig/enabled-string',
    ],
    reason: 'the older document types metric_logging as any object; latest closes and types it',
  },
  {
    schema: 'SFTExperimentalTrainingConfig',
    document: OLD,
    ids: ['SFTExperimentalTrainingConfig/any-key'],
    reason: 'the older document takes any object as the SFT experimental_config; latest closes it empty',
  },
  {
    schema: 'CreateSFTTrainingJob',
    document: OLD,
    ids: ['CreateSFTTrainingJob/unknown-key', 'CreateSFTTrainingJob/experimental-key'],
    reason: 'latest closes the SFT job body and its experimental_config',
  },
  {
    schema: 'TrajectoryGroup',
    document: OLD,
    ids: ['TrajectoryGroup/metrics-string', 'TrajectoryGroup/exception-missing-message'],
    reason:
      'the older document does not declare exceptions/metadata/metrics/logs (any value passes as an extra key); latest types them',
  },
  {
    schema: 'TrajectoryGroup',
    document: LATEST,
    ids: ['TrajectoryGroup/missing-trajectories'],
    reason: 'latest makes trajectories optional; the primary contract requires it and every real client sends it',
  },
  {
    schema: 'Trajectory',
    document: OLD,
    ids: ['Trajectory/exchanges-not-object'],
    reason: 'latest declares exchanges as an object',
  },
  {
    schema: 'Trajectory',
    document: LATEST,
    ids: ['Trajectory/metadata-nested', 'Trajectory/metadata-array'],
    reason:
      "latest loosens metadata to any JSON value; we keep the primary document's scalars, so what we send passes on both",
  },
  {
    schema: 'TrainingJobResponse',
    document: LATEST,
    ids: ['TrainingJobResponse/short-form'],
    reason: 'the older service returns only {id}; latest requires the full form; a client must accept both',
  },
  {
    schema: 'TrainingJobResponse',
    document: OLD,
    ids: ['TrainingJobResponse/bad-status', 'TrainingJobResponse/bad-timestamp'],
    reason: 'the older document declares only id; we type the full form of latest',
  },
  // Formats: zod's checks are not ajv-formats'.
  {
    schema: 'Trajectory',
    document: OLD,
    ids: ['Trajectory/start-time-naive'],
    reason:
      "zod's datetime accepts an ISO time without offset (Python's datetime.now()); ajv-formats' date-time requires one",
  },
  {
    schema: 'Trajectory',
    document: LATEST,
    ids: ['Trajectory/start-time-naive'],
    reason:
      "zod's datetime accepts an ISO time without offset (Python's datetime.now()); ajv-formats' date-time requires one",
  },
  {
    schema: 'Uuid',
    document: OLD,
    ids: ['Uuid/urn'],
    reason: "ajv-formats' uuid also accepts the urn:uuid: prefix; zod takes the 8-4-4-4-12 form only",
  },
  {
    schema: 'Uuid',
    document: LATEST,
    ids: ['Uuid/urn'],
    reason: "ajv-formats' uuid also accepts the urn:uuid: prefix; zod takes the 8-4-4-4-12 form only",
  },
];

function zodSchema(name: SchemaName): z.ZodType {
  return schemaModule[name] as z.ZodType;
}

function describeZodIssues(error: z.ZodError | undefined): string {
  return error ? z.prettifyError(error) : 'accepted';
}

function differenceOf(testCase: CorpusCase, document: DocumentName): DeliberateDifference | undefined {
  return deliberateDifferences.find(
    (row) => row.ids.includes(testCase.id) && row.document === document && row.schema === testCase.schema,
  );
}

describe('conformance corpus', () => {
  it('holds at least 150 instances with unique ids, most of them checked against the documents', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(150);
    const ids = corpus.map((testCase) => testCase.id);
    expect(new Set(ids).size).toBe(ids.length);
    // (structure.unit.test.ts checks that every exported schema has valid and invalid instances.)
    const checked = corpus.filter((testCase) => documentNames.some((document) => targetOf(testCase.schema, document)));
    expect(checked.length).toBeGreaterThanOrEqual(300);
  });

  it('every deliberate difference names an existing instance of its schema', () => {
    for (const row of deliberateDifferences) {
      for (const id of row.ids) expect(corpus.find((testCase) => testCase.id === id)?.schema, id).toBe(row.schema);
      expect(targetOf(row.schema, row.document), `${row.schema} has no ${row.document} schema`).not.toBeNull();
    }
  });

  it.each(corpus.map((testCase) => [testCase.id, testCase] as const))('%s', (_id, testCase) => {
    const result = zodSchema(testCase.schema).safeParse(testCase.value);
    expect(result.success, `zod: ${describeZodIssues(result.error)}`).toBe(testCase.valid);

    for (const document of documentNames) {
      const target = targetOf(testCase.schema, document);
      if (!target) continue;
      const validate = validatorOf(document, target.pointer);
      const documentAccepts = validate(testCase.value);
      const disagree =
        target.relation === 'same' ? documentAccepts !== result.success : result.success && !documentAccepts;
      const difference = differenceOf(testCase, document);
      const detail = `${document} ${documentAccepts ? 'accepts' : `rejects (${JSON.stringify(validate.errors?.slice(0, 3))})`}, zod ${
        result.success ? 'accepts' : 'rejects'
      }`;
      if (difference) expect(disagree, `listed as a deliberate difference but they agree: ${detail}`).toBe(true);
      else expect(disagree, detail).toBe(false);
    }
  });
});

describe('contract documents', () => {
  it('use only string formats that ajv checks', () => {
    const formats = new Set<string>();
    JSON.stringify(documents, (key, value: unknown) => {
      if (key === 'format' && typeof value === 'string') formats.add(value);
      return value;
    });
    expect([...formats].sort()).toEqual(['date-time', 'uuid']);
    for (const format of formats) expect(knownFormats.has(format), format).toBe(true);
  });

  const shared = new URL('../../../shared/api/', import.meta.url);
  it.skipIf(!existsSync(shared))('the vendored copies in docs/api/ equal the shared contract', () => {
    // The contract's README is vendored as contract.md: docs/api/README.md is the folder's own
    // page (the published documents and the service's own document, docs/api/README.md).
    const vendored: Record<string, string> = { 'README.md': 'contract.md' };
    for (const name of [...documentNames, 'README.md', 'service-description.md']) {
      expect(readFileSync(new URL(vendored[name] ?? name, contractDirectory), 'utf8'), name).toBe(
        readFileSync(new URL(name, shared), 'utf8'),
      );
    }
  });
});
