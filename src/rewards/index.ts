/**
 * Rewards: the reward function type, weighted combinations, built-in rewards, helpers to read a
 * trajectory, and the relative group judge.
 * @module
 */
export { evaluateReward, type RewardFn, type WeightedReward } from './reward-function.js';
export { combineRewards, toRewardFn, type RewardSet, type RewardSpec } from './combine-rewards.js';
export { JudgeError, RewardFunctionError, type JudgeFailure } from './reward-errors.js';
export {
  exactMatch,
  normalizeAnswer,
  normalizedMatch,
  regexMatch,
  type ExpectedValue,
  type NormalizeOptions,
} from './match-rewards.js';
export { extractJson, validJson, type SafeParser } from './json-reward.js';
export { containsValue, toolCalledWith, type ExpectedArguments } from './tool-call-reward.js';
export { lengthPenalty, type LengthPenaltyOptions } from './length-penalty.js';
export {
  assistantTexts,
  choicesOf,
  completionTokenCount,
  finalAssistantText,
  toolCallsOf,
  type AssistantTextsOptions,
  type HasMessagesAndChoices,
  type ModelToolCall,
} from './trajectory-text.js';
export {
  DEFAULT_JUDGE_RUBRIC,
  buildJudgeMessages,
  judgeConversations,
  relativeJudge,
  type GroupJudge,
  type JudgeCallOptions,
  type JudgeScore,
  type RelativeJudgeOptions,
} from './relative-judge.js';
