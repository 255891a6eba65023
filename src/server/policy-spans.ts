/**
 * Policy provenance on chat completion choices: `policy_token_spans`, the field the hosted
 * service's inference adds to each choice and OpenPipe ART reads (its `PipelineTrainer` refuses an
 * evaluation whose choices lack it). One span covers all of a choice's completion tokens: the local
 * service samples a whole completion from one checkpoint.
 */
import type { Choice } from '../schema/index.js';

/** A half-open interval of completion tokens sampled by one policy version (ART's `PolicyTokenSpan`). */
export interface PolicyTokenSpan {
  readonly start_token: number;
  readonly end_token: number;
  /** Unique per choice: `<completion id>:<choice index>`. */
  readonly generation_id: string;
  /** The step of the weights that sampled the tokens (0 = the base weights). */
  readonly policy_version: number;
  /** Which weights: the model's pinned inference name, or the base model id. */
  readonly lora_slot: string;
  /** Weight updates behind these weights: the step again (a checkpoint never changes). */
  readonly update_seq: number;
}

/** What {@link withPolicyTokenSpans} needs to know about the completion. */
export interface PolicySpanContext {
  readonly completionId: string;
  readonly step: number;
  readonly slot: string;
  /** The client asked for logprobs (otherwise they were only fetched to count tokens, and are dropped). */
  readonly keepLogprobs: boolean;
}

/**
 * Adds `policy_token_spans` to each choice that has completion tokens (a choice of zero tokens
 * gets none: a span cannot be empty), counting tokens from the choice's logprobs, which the
 * service always asks the engine for. Drops the logprobs when the client did not ask for them.
 */
export function withPolicyTokenSpans(choices: readonly Choice[], context: PolicySpanContext): Choice[] {
  return choices.map((choice) => {
    const tokens = choice.logprobs?.content?.length ?? 0;
    const spans: PolicyTokenSpan[] =
      tokens === 0
        ? []
        : [
            {
              start_token: 0,
              end_token: tokens,
              generation_id: `${context.completionId}:${choice.index}`,
              policy_version: context.step,
              lora_slot: context.slot,
              update_seq: context.step,
            },
          ];
    return {
      ...choice,
      ...(context.keepLogprobs ? {} : { logprobs: null }),
      ...(spans.length > 0 ? { policy_token_spans: spans } : {}),
    };
  });
}
