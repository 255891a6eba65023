/**
 * `policyloop/testing`: helpers to test reward functions, rollouts and judges: hand-built Choices,
 * trajectories and groups, a scripted chat-completions client, the real local service on a
 * random loopback port, `ScriptedBackend` (the real local service over a scripted engine, to test
 * training scripts and `RLTrainer` runs in milliseconds a step); and `writeTinyQwen3`, a tiny random-weight Qwen3 model folder with the real
 * Qwen3 tokenizer and chat template, for offline tests and examples on a real model's text.
 * @module
 */
export { makeChoice, type MakeChoiceOptions, type MakeToolCall } from './make-choice.js';
export { makeGroup, makeTrajectory, type MakeTrajectoryOptions } from './make-trajectory.js';
export {
  scriptedChatClient,
  type ScriptedChatClient,
  type ScriptedChatClientOptions,
  type ScriptedRequest,
  type ScriptedResponse,
} from './scripted-chat-client.js';
export { startTestService, type StartTestServiceOptions, type TestService } from './start-test-service.js';
export {
  ScriptedBackend,
  type ScriptedBackendOptions,
  type ScriptedSample,
  type ScriptedSampleRequest,
  type ScriptedTrain,
  type ScriptedTrainingJob,
} from './scripted-backend.js';
export { writeTinyQwen3, type TinyQwen3Options } from '../engine/hf/tiny-qwen3.js';
