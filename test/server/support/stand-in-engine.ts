/**
 * A small deterministic stand-in for the policy engine, for developing and testing the service
 * around the engine seam: it echoes prompts, calls tools on request and "trains" by writing a
 * JSON file. Tests that need exact control over job timing (holding a job RUNNING, failing on
 * purpose) use it; everything else runs against the real engine.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { delay, raceSignal } from '../../../src/internal/delay.js';
import {
  completionUsage,
  EngineInputError,
  type Engine,
  type EngineTrainingEvent,
  type EngineTrainingJob,
  type EngineTrainingResult,
  type PolicyRef,
} from '../../../src/engine/types.js';
import type {
  ChatCompletionRequestBody,
  ChatCompletionResult,
  Choice,
  ChatCompletionTokenLogprob,
} from 'policyloop/schema';

/** Options of the stand-in. */
export interface StandInEngineOptions {
  /** Pause between gradient steps. @default 5 */
  readonly stepDelayMs?: number;
  /** When set, every job waits for this promise before its first step (to hold jobs RUNNING). */
  readonly gate?: () => Promise<void>;
  /** Pause before answering each completion (to keep requests in flight; ends early when the request's signal aborts). @default 0 */
  readonly completionDelayMs?: number;
}

/** A stand-in engine plus what it was asked to do. */
export interface StandInEngine extends Engine {
  readonly trainedJobs: EngineTrainingJob[];
  readonly policies: PolicyRef[];
  /** The signal the service passed with each completion, in order. */
  readonly completionSignals: (AbortSignal | undefined)[];
  /** Resolves once `count` completions have reached the engine (so they are in flight). */
  completionsStarted(count: number): Promise<void>;
}

/** Base models the stand-in serves (the real engine's ids). */
export const STAND_IN_BASE_MODELS = ['policyloop/tiny-chat', 'policyloop/small-chat'];

/** Creates the stand-in. `experimental_config.learning_rate < 0` or an SFT row saying "fail" make a job fail. */
export function createStandInEngine(options: StandInEngineOptions = {}): StandInEngine {
  const trainedJobs: EngineTrainingJob[] = [];
  const policies: PolicyRef[] = [];
  const completionSignals: (AbortSignal | undefined)[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const stepDelayMs = options.stepDelayMs ?? 5;
  return {
    trainedJobs,
    policies,
    completionSignals,
    completionsStarted(count: number): Promise<void> {
      if (completionSignals.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    baseModels: () => STAND_IN_BASE_MODELS,
    async chatCompletion(
      policy: PolicyRef,
      request: ChatCompletionRequestBody,
      completionOptions: { readonly signal?: AbortSignal } = {},
    ): Promise<ChatCompletionResult> {
      policies.push(policy);
      completionSignals.push(completionOptions.signal);
      for (const waiter of waiters.filter((entry) => completionSignals.length >= entry.count)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
      // Honours the signal as the real engine does: an aborted request stops waiting at once.
      if (options.completionDelayMs !== undefined) await delay(options.completionDelayMs, completionOptions.signal);
      const last = request.messages[request.messages.length - 1];
      const text = typeof last?.content === 'string' ? last.content : '';
      if (text.length > 1000)
        throw new EngineInputError('Prompt is longer than the context of 1000 characters', ['body', 'messages']);
      const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? 16;
      const choices: Choice[] = [];
      const n = request.n ?? 1;
      for (let index = 0; index < n; index += 1) {
        const full = `echo ${index}: ${text}`;
        const content = full.slice(0, maxTokens);
        const callTool =
          request.tools !== undefined &&
          request.tools !== null &&
          request.tools.length > 0 &&
          (request.tool_choice === 'required' || typeof request.tool_choice === 'object');
        const tokens: ChatCompletionTokenLogprob[] = [...content].map((character) => ({
          token: character,
          bytes: [...Buffer.from(character)],
          logprob: -0.5,
          top_logprobs: request.top_logprobs
            ? [{ token: character, bytes: [...Buffer.from(character)], logprob: -0.5 }]
            : [],
        }));
        const tool = request.tools?.[0];
        const choice: Choice =
          callTool && tool !== undefined && tool.type === 'function'
            ? {
                index,
                finish_reason: 'tool_calls',
                logprobs: request.logprobs ? { content: tokens, refusal: null } : null,
                message: {
                  role: 'assistant',
                  content: null,
                  tool_calls: [
                    {
                      id: `call_${index}`,
                      type: 'function',
                      function: { name: tool.function.name, arguments: '{"x": 1}' },
                    },
                  ],
                },
              }
            : {
                index,
                finish_reason: content.length < full.length ? 'length' : 'stop',
                logprobs: request.logprobs ? { content: tokens, refusal: null } : null,
                message: { role: 'assistant', content },
              };
        choices.push(choice);
      }
      const promptTokens = text.length + 4;
      const completionTokens = choices.reduce((sum, choice) => sum + (choice.message.content?.length ?? 4), 0);
      return {
        choices,
        usage: completionUsage(promptTokens, completionTokens),
      };
    },
    async train(
      job: EngineTrainingJob,
      trainOptions: { onEvent: (event: EngineTrainingEvent) => void; signal?: AbortSignal },
    ): Promise<EngineTrainingResult> {
      trainedJobs.push(job);
      const sequences = job.kind === 'rl' ? job.trajectoryGroups.length : job.rows.length;
      if (options.gate !== undefined) await raceSignal(options.gate(), trainOptions.signal);
      if (job.kind === 'rl' && (job.config?.learning_rate ?? 1) < 0)
        throw new Error(`learning_rate must be positive, got ${job.config?.learning_rate}`);
      if (job.kind === 'sft' && JSON.stringify(job.rows).includes('"fail"')) throw new Error('SFT row asked to fail');
      trainOptions.onEvent({ type: 'training_started', data: { num_sequences: sequences } });
      for (let step = 0; step < sequences; step += 1) {
        await raceSignal(new Promise((resolve) => setTimeout(resolve, stepDelayMs)), trainOptions.signal);
        trainOptions.onEvent({ type: 'gradient_step', data: { loss: 1 / (step + 1), learning_rate: 0.001 } });
      }
      await mkdir(job.outputPath, { recursive: true });
      await writeFile(join(job.outputPath, 'weights.json'), JSON.stringify({ step: job.step, from: job.policy.key }));
      return { metrics: { loss: 0.5, steps: sequences } };
    },
    async close(): Promise<void> {},
  };
}
