/**
 * Turns RL trajectory groups and SFT rows into token sequences with per-token training targets:
 * which tokens are learned, their advantage, and (for RL) the logprob they were sampled with.
 */
import type { ExperimentalTrainingConfig, SFTRow, TrajectoryGroup } from '../schema/index.js';
import { TemplateBuilder, assistantBodyTokens } from './chat-template.js';
import { BYTE_TOKENIZER, END_TOKEN_ID, specialTokenId } from './tokenizer.js';
import type { Tokenizer } from './tokenizer.js';
import { pushAll } from '../internal/arrays.js';

/** A token sequence and what to learn from it. */
export interface TrainingSequence {
  /** All tokens, context and trainable. */
  readonly tokens: number[];
  /** Per token: 1 when it is learned (predicted from the tokens before it), else 0. */
  readonly mask: number[];
  /** Per token: the advantage (RL) or 1 (SFT). */
  readonly weights: number[];
  /** Per token: logprob it was sampled with, or NaN when unknown (then the current policy's is used). */
  readonly oldLogprobs: number[];
  /** Position of the first token (the sequence was cut at the front); absent means 0. */
  readonly offset?: number | undefined;
}

/** RL sequences plus the group statistics reported with the gradient steps. */
export interface RlData {
  readonly sequences: TrainingSequence[];
  readonly groupsSubmitted: number;
  readonly groupsTrainable: number;
  readonly trajectories: number;
  /** Choice items in all groups (main conversations and additional histories). */
  readonly choices: number;
  /** Mean reward over all trajectories. */
  readonly reward: number;
  /** Mean over groups of the population std of rewards. */
  readonly rewardStdDev: number;
}

/** Whether an item of `messages_and_choices` is a Choice (a sampled completion) rather than a message. */
export function isChoiceItem(item: unknown): boolean {
  const record = item as Record<string, unknown>;
  return record['role'] === undefined && 'message' in record;
}

/** Whether advantages are divided by the group's reward std (default true). */
export function scalesRewards(config: ExperimentalTrainingConfig | null): boolean {
  return config?.scale_rewards ?? config?.normalize_advantages ?? true;
}

/**
 * `advantage_balance` (b in [-1, 1]) applied to an advantage as ART's packing does: with b > 0 the
 * negative advantages are scaled by 1 − b, with b < 0 the positive ones by 1 + b (1: only positive
 * advantages train, -1: only negative ones; 0 or absent: unchanged).
 * @example
 * balancedAdvantage(-2, 0.5); // -1
 * balancedAdvantage(2, 0.5); // 2
 */
export function balancedAdvantage(advantage: number, balance: number | null | undefined): number {
  if (!balance) return advantage;
  if (balance > 0) return advantage > 0 ? advantage : advantage * (1 - balance);
  return advantage < 0 ? advantage : advantage * (1 + balance);
}

/** One conversation of a trajectory (its main one or an additional history) and where it is in the request. */
export interface RlHistory {
  readonly items: TrajectoryGroup['trajectories'][number]['messages_and_choices'];
  readonly tools: TrajectoryGroup['trajectories'][number]['tools'];
  /** The JSON path of the trajectory or history, for error messages. */
  readonly where: string;
}

/**
 * The group statistics of RL data, shared by every model's sequence builder: advantage = reward -
 * group mean (divided by the group std unless `scale_rewards`/`normalize_advantages` is false),
 * then weighed by `advantage_balance` ({@link balancedAdvantage}); groups whose rewards are all
 * equal are skipped. Calls `visit` with each history (the main
 * conversation and each additional history, trained alike) of every trajectory in a trainable
 * group, with the trajectory's advantage.
 */
export function visitRlHistories(
  groups: readonly TrajectoryGroup[],
  config: ExperimentalTrainingConfig | null,
  visit: (history: RlHistory, advantage: number) => void,
): Omit<RlData, 'sequences'> {
  const scale = scalesRewards(config);
  let groupsTrainable = 0;
  let trajectories = 0;
  let rewardSum = 0;
  let stdSum = 0;
  let groupsWithTrajectories = 0;
  let choices = 0;
  groups.forEach((group, groupIndex) => {
    for (const trajectory of group.trajectories) {
      for (const items of [
        trajectory.messages_and_choices,
        ...(trajectory.additional_histories ?? []).map((history) => history.messages_and_choices),
      ])
        choices += items.filter(isChoiceItem).length;
    }
    const rewards = group.trajectories.map((trajectory) => trajectory.reward ?? 0);
    trajectories += rewards.length;
    if (rewards.length === 0) return;
    groupsWithTrajectories += 1;
    rewardSum += rewards.reduce((a, b) => a + b, 0);
    const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
    const std = Math.sqrt(rewards.reduce((a, b) => a + (b - mean) ** 2, 0) / rewards.length);
    stdSum += std;
    if (std < 1e-9) return;
    groupsTrainable += 1;
    group.trajectories.forEach((trajectory, trajectoryIndex) => {
      const advantage = balancedAdvantage(
        scale ? ((trajectory.reward ?? 0) - mean) / (std + 1e-6) : (trajectory.reward ?? 0) - mean,
        config?.advantage_balance,
      );
      // The main conversation and each additional history (sub-agent) are trained alike.
      const histories = [
        {
          items: trajectory.messages_and_choices,
          tools: trajectory.tools,
          where: `trajectory_groups[${groupIndex}].trajectories[${trajectoryIndex}]`,
        },
        ...(trajectory.additional_histories ?? []).map((history, historyIndex) => ({
          items: history.messages_and_choices,
          tools: history.tools,
          where: `trajectory_groups[${groupIndex}].trajectories[${trajectoryIndex}].additional_histories[${historyIndex}]`,
        })),
      ];
      for (const history of histories) visit(history, advantage);
    });
  });
  return {
    groupsSubmitted: groups.length,
    groupsTrainable,
    trajectories,
    choices,
    reward: trajectories > 0 ? rewardSum / trajectories : 0,
    rewardStdDev: groupsWithTrajectories > 0 ? stdSum / groupsWithTrajectories : 0,
  };
}

/**
 * Builds RL sequences: advantage = reward - group mean (divided by the group std unless
 * `scale_rewards`/`normalize_advantages` is false); groups whose rewards are all equal are skipped.
 * Only `Choice` items are learned; their token ids come from their logprobs (`bytes` or
 * `token_id:N`). Throws an Error fit for the user when a Choice lacks logprobs (unless
 * `allow_training_without_logprobs`) or its tokens are not this engine's.
 */
export function buildRlData(
  groups: readonly TrajectoryGroup[],
  config: ExperimentalTrainingConfig | null,
  tokenizer: Tokenizer = BYTE_TOKENIZER,
): RlData {
  const allowWithoutLogprobs = config?.allow_training_without_logprobs ?? false;
  const sequences: TrainingSequence[] = [];
  const statistics = visitRlHistories(groups, config, (history, advantage) => {
    const builder = new TemplateBuilder(tokenizer).appendTools(history.tools);
    const oldLogprobs: number[] = [];
    const pad = (): void => {
      while (oldLogprobs.length < builder.tokens.length) oldLogprobs.push(Number.NaN);
    };
    const items = history.items;
    items.forEach((item, itemIndex) => {
      const where = `${history.where}.messages_and_choices[${itemIndex}]`;
      if (!isChoiceItem(item)) {
        builder.appendMessage(item as Record<string, unknown>, false, where);
        pad();
        return;
      }
      const choice = item as {
        message: Record<string, unknown>;
        logprobs?:
          | {
              content?: { token: string; bytes?: number[] | null | undefined; logprob: number }[] | null | undefined;
            }
          | null
          | undefined;
      };
      builder.tokens.push(specialTokenId('<|assistant|>'));
      pad();
      const entries = choice.logprobs?.content ?? null;
      // An empty logprobs list is a completion of no tokens (e.g. a stop sequence matched at
      // once), not a Choice without logprobs, as long as the message is empty too.
      const body =
        entries && entries.length === 0 ? assistantBodyTokens(choice.message, `${where}.message`, tokenizer) : [];
      let ids: number[];
      let logprobs: number[];
      if (entries && (entries.length > 0 || body.length === 0)) {
        ids = entries.map((entry, entryIndex) => {
          const id = tokenizer.recoverTokenId(entry);
          if (id === null) {
            throw new Error(
              `Cannot recover the token id of ${where}.logprobs.content[${entryIndex}] (token ${JSON.stringify(entry.token)}): expected a token of this model's ${tokenizer.name} tokenizer (its \`bytes\`, a special token, or "token_id:<id>"). Was this Choice sampled from another model?`,
            );
          }
          return id;
        });
        logprobs = entries.map((entry) => entry.logprob);
      } else if (allowWithoutLogprobs) {
        ids = assistantBodyTokens(choice.message, `${where}.message`, tokenizer);
        ids.push(END_TOKEN_ID);
        logprobs = ids.map(() => Number.NaN);
      } else {
        throw new Error(
          `${where} is a Choice without logprobs: request chat completions with logprobs: true, or set experimental_config.allow_training_without_logprobs to train it with the current policy's logprobs.`,
        );
      }
      builder.appendTokens(ids, true);
      pushAll(oldLogprobs, logprobs);
      if (itemIndex < items.length - 1 && ids[ids.length - 1] !== END_TOKEN_ID) {
        builder.tokens.push(END_TOKEN_ID);
        pad();
      }
    });
    const mask = builder.tokens.map(() => 0);
    for (const span of builder.spans) for (let index = span.start; index < span.end; index += 1) mask[index] = 1;
    if (builder.spans.length > 0)
      sequences.push({ tokens: builder.tokens, mask, weights: builder.tokens.map(() => advantage), oldLogprobs });
  });
  return { sequences, ...statistics };
}

/**
 * Builds SFT sequences: every assistant message is learned (`all`) or only the last one of each
 * row (`last`); everything else is context.
 */
export function buildSftSequences(
  rows: readonly SFTRow[],
  assistantTurns: 'all' | 'last',
  tokenizer: Tokenizer = BYTE_TOKENIZER,
): TrainingSequence[] {
  return rows.map((row, rowIndex) => {
    const messages = row.messages as readonly Record<string, unknown>[];
    let lastAssistant = -1;
    messages.forEach((message, index) => {
      if (message['role'] === 'assistant') lastAssistant = index;
    });
    if (lastAssistant < 0)
      throw new Error(
        `SFT row ${rowIndex} has no assistant message to learn: expected at least one message with role "assistant".`,
      );
    const builder = new TemplateBuilder(tokenizer).appendTools(row.tools);
    messages.forEach((message, index) => {
      const learned = message['role'] === 'assistant' && (assistantTurns === 'all' || index === lastAssistant);
      builder.appendMessage(message, learned, `rows[${rowIndex}].messages[${index}]`);
    });
    const mask = builder.tokens.map(() => 0);
    for (const span of builder.spans) for (let index = span.start; index < span.end; index += 1) mask[index] = 1;
    return {
      tokens: builder.tokens,
      mask,
      weights: builder.tokens.map(() => 1),
      oldLogprobs: builder.tokens.map(() => Number.NaN),
    };
  });
}
