/**
 * policyloop: train LLM agents with reinforcement learning from TypeScript.
 *
 * The root entry holds everything a user script needs and nothing heavy: the wire schemas, the
 * training-API client, rollouts, rewards and training. The local service (hono, SQLite, the
 * neural engine) lives behind `policyloop/server` and is loaded only when used.
 * @module
 */
export * from './schema/index.js';
export * from './client/index.js';
export * from './rollout/index.js';
export * from './rewards/index.js';
export * from './training/index.js';
export { PolicyloopError } from './internal/errors.js';
