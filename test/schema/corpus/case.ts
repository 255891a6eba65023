/** The shape of one conformance-corpus instance, and the schema names it may name. */
import type { z } from 'zod';
import type * as schemas from 'policyloop/schema';

type Module = typeof schemas;

/** Name of an exported zod schema of `src/schema`. */
export type SchemaName = { [K in keyof Module]: Module[K] extends z.ZodType ? K : never }[keyof Module];

/**
 * One instance of the corpus: a value, the schema it is checked against, and the verdict the
 * contract intends (`valid`). The conformance test checks the verdict with our zod schema and
 * compares it with both OpenAPI documents.
 */
export interface CorpusCase {
  /** Unique, stable id; the deliberate-differences table refers to it. */
  id: string;
  /** The zod export the value is checked against. */
  schema: SchemaName;
  /** What our zod schema must say. */
  valid: boolean;
  /** The instance, exactly as it would be on the wire (JSON-compatible). */
  value: unknown;
}

/**
 * Builds cases of one schema from `[id, value]` pairs.
 * @example
 * cases('AudioReference', true, [['audio-id', { id: 'a1' }]]);
 */
export function cases(schema: SchemaName, valid: boolean, entries: ReadonlyArray<readonly [string, unknown]>): CorpusCase[] {
  return entries.map(([id, value]) => ({ id: `${schema}/${id}`, schema, valid, value }));
}
