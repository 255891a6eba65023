/**
 * `policyloop/schema`: zod schemas of every wire type of the training API, the single source of
 * truth that the client, the local service, the rollout runner and the CLI all import. Each schema
 * has a same-named inferred type. Names follow the OpenAPI component names of the contract
 * (`docs/api/`), except where one would shadow a JavaScript or DOM global (`File`, `Function`,
 * `Audio`, `History`; see `docs/schema.md`).
 * @module
 */
export * from './messages.js';
export * from './choice.js';
export * from './trajectory.js';
export * from './page.js';
export * from './api.js';
export * from './chat.js';
export * from './metrics.js';
export * from './local.js';
export * from './run-order.js';
