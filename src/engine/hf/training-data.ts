/**
 * RL trajectory groups and SFT rows as token sequences for a Hugging Face model, rendered with
 * the model's own chat template. Each learned assistant turn is one sequence: the conversation
 * before it, rendered with the generation prompt exactly as sampling renders it, then the turn.
 */
import type { ExperimentalTrainingConfig, SFTRow, TrajectoryGroup } from '../../schema/index.js';
import { isChoiceItem, visitRlHistories } from '../training-data.js';
import type { RlData, TrainingSequence } from '../training-data.js';
import { promptTokens } from '../../text/prompt.js';
import type { TextLayer } from '../../text/loader.js';

type ChatMessages = Parameters<TextLayer['renderChat']>[0];
type Tools = Parameters<TextLayer['renderChat']>[1]['tools'];

/** An OpenAI assistant message as the chat template expects it (no null fields it would print). */
function assistantMessage(message: Record<string, unknown>): Record<string, unknown> {
  const result: Record<string, unknown> = { role: 'assistant', content: message['content'] ?? '' };
  if (Array.isArray(message['tool_calls']) && message['tool_calls'].length > 0)
    result['tool_calls'] = message['tool_calls'];
  return result;
}

const isTokenIds = (value: unknown): value is number[] =>
  Array.isArray(value) && value.length > 0 && value.every((id) => Number.isInteger(id) && id >= 0);

/**
 * The token ids a Choice was sampled from and sampled, when its sampler kept them
 * (`prompt_token_ids` and `token_ids` on the Choice, as the Tinker backend records them).
 */
export function sampledTokenIds(choice: { prompt_token_ids?: unknown; token_ids?: unknown }): {
  prompt: number[];
  completion: number[];
} | null {
  return isTokenIds(choice.prompt_token_ids) && isTokenIds(choice.token_ids)
    ? { prompt: choice.prompt_token_ids, completion: choice.token_ids }
    : null;
}

function sequenceOf(prompt: number[], learned: number[], weight: number, logprobs: number[] | null): TrainingSequence {
  const tokens = [...prompt, ...learned];
  return {
    tokens,
    mask: tokens.map((_, index) => (index >= prompt.length ? 1 : 0)),
    weights: tokens.map(() => weight),
    oldLogprobs: [...prompt.map(() => Number.NaN), ...(logprobs ?? learned.map(() => Number.NaN))],
  };
}

/**
 * Builds RL sequences, with the same advantages, group statistics and errors as the built-in
 * models' {@link RlData}: one sequence per Choice, its token ids recovered from its logprobs.
 */
export function buildHfRlData(
  groups: readonly TrajectoryGroup[],
  config: ExperimentalTrainingConfig | null,
  text: TextLayer,
): RlData {
  const allowWithoutLogprobs = config?.allow_training_without_logprobs ?? false;
  const stopIds = text.stopTokenIds;
  const sequences: TrainingSequence[] = [];
  const statistics = visitRlHistories(groups, config, (history, advantage) => {
    const messages: unknown[] = [];
    history.items.forEach((item, itemIndex) => {
      if (!isChoiceItem(item)) {
        messages.push(item);
        return;
      }
      const where = `${history.where}.messages_and_choices[${itemIndex}]`;
      const choice = item as {
        message: Record<string, unknown>;
        logprobs?: { content?: { token: string; logprob: number }[] | null | undefined } | null | undefined;
        prompt_token_ids?: unknown;
        token_ids?: unknown;
      };
      messages.push(assistantMessage(choice.message));
      const entries = choice.logprobs?.content ?? null;
      const sampled = sampledTokenIds(choice);
      if (sampled && entries && entries.length === sampled.completion.length) {
        // Token in, token out: the ids the sampler saw and produced; nothing is rendered again.
        sequences.push(
          sequenceOf(
            sampled.prompt,
            sampled.completion,
            advantage,
            entries.map((entry) => entry.logprob),
          ),
        );
        return;
      }
      const prompt = promptTokens(text, messages.slice(0, -1), history.tools as readonly unknown[] | null | undefined);
      let ids: number[];
      let logprobs: number[] | null;
      if (entries && entries.length > 0) {
        ids = entries.map((entry, entryIndex) => {
          const id = text.recoverTokenId(entry);
          if (id === null)
            throw new Error(
              `Cannot recover the token id of ${where}.logprobs.content[${entryIndex}] (token ${JSON.stringify(entry.token)}): expected a token of this model's tokenizer (its text, or "token_id:<id>"). Was this Choice sampled from another model?`,
            );
          return id;
        });
        logprobs = entries.map((entry) => entry.logprob);
      } else if (entries && entries.length === 0) {
        return;
      } else if (allowWithoutLogprobs) {
        const body = typeof choice.message['content'] === 'string' ? choice.message['content'] : '';
        ids = [...text.encode(body), ...(stopIds.length > 0 ? [stopIds[0] as number] : [])];
        logprobs = null;
      } else {
        throw new Error(
          `${where} is a Choice without logprobs: request chat completions with logprobs: true, or set experimental_config.allow_training_without_logprobs to train it with the current policy's logprobs.`,
        );
      }
      sequences.push(sequenceOf(prompt, ids, advantage, logprobs));
    });
  });
  return { sequences, ...statistics };
}

/**
 * Builds SFT sequences: each learned assistant message (`all`, or the `last` of each row) is one
 * sequence, its tokens up to and including the first end-of-turn token learned. Apart from the
 * built-in `buildSftSequences` (one multi-span sequence per row): a model's chat template may
 * render earlier turns differently once later ones follow (Qwen3 drops old reasoning), so each
 * turn is learned after the prompt exactly as sampling renders it.
 */
export function buildHfSftSequences(
  rows: readonly SFTRow[],
  assistantTurns: 'all' | 'last',
  text: TextLayer,
): TrainingSequence[] {
  const stopIds = new Set(text.stopTokenIds);
  const sequences: TrainingSequence[] = [];
  rows.forEach((row, rowIndex) => {
    const messages = row.messages as readonly Record<string, unknown>[];
    const learnedIndices = messages.flatMap((message, index) => (message['role'] === 'assistant' ? [index] : []));
    if (learnedIndices.length === 0)
      throw new Error(
        `SFT row ${rowIndex} has no assistant message to learn: expected at least one message with role "assistant".`,
      );
    const tools = row.tools as readonly unknown[] | null | undefined;
    for (const index of assistantTurns === 'last' ? learnedIndices.slice(-1) : learnedIndices) {
      const before = messages.slice(0, index);
      const prefix = text.renderChat(before as unknown as ChatMessages, {
        tools: (tools ?? undefined) as Tools,
        addGenerationPrompt: true,
      });
      const full = text.renderChat(
        [...before, assistantMessage(messages[index] as Record<string, unknown>)] as unknown as ChatMessages,
        { tools: (tools ?? undefined) as Tools, addGenerationPrompt: false },
      );
      if (!full.startsWith(prefix))
        throw new Error(
          `SFT row ${rowIndex}: the chat template renders messages[${index}] in a way that does not extend the prompt before it, so its tokens cannot be told apart.`,
        );
      const turn = text.encode(full.slice(prefix.length));
      const end = turn.findIndex((id) => stopIds.has(id));
      const learned = end >= 0 ? turn.slice(0, end + 1) : turn;
      sequences.push(sequenceOf(text.encode(prefix), learned, 1, null));
    }
  });
  return sequences;
}
