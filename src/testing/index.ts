/**
 * `policyloop/testing`: helpers to test reward functions, rollouts and judges: hand-built Choices,
 * trajectories and groups, a scripted chat-completions client, and the real local service on a
 * random loopback port.
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
