/** The whole conformance corpus. */
import { apiCases } from './api.js';
import type { CorpusCase } from './case.js';
import { chatCases } from './chat.js';
import { choiceCases } from './choice.js';
import { messageCases } from './messages.js';
import { trajectoryCases } from './trajectory.js';

export type { CorpusCase, SchemaName } from './case.js';

/** Every instance, valid and invalid, of every schema. */
export const corpus: CorpusCase[] = [...messageCases, ...choiceCases, ...trajectoryCases, ...apiCases, ...chatCases];
