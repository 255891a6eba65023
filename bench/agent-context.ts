/**
 * Agent context: does a realistic small agent fit the local engine, and how long does an RL step
 * on its rollouts take? The prompt is an AI SDK-style tool-loop call (a system prompt, three
 * tools, four turns; ~6,000 characters rendered, test/engine/support/agent-prompt.ts).
 *
 * Prints, from one run (the cores may be shared: compare the ratios, not the seconds):
 * - tokens per character of the rendered prompt for the byte tokenizer (the baseline) and the BPE
 *   tokenizer of `policyloop/agent-chat`, and the BPE encode time of the prompt;
 * - one RL step of 8 groups × 8 rollouts on `policyloop/agent-chat` (sampling, then the training
 *   job with its checkpoint write), against the same step shape on `policyloop/tiny-chat` with the
 *   demo's short prompts (the baseline).
 *
 * The agent step is then repeated through the local service over loopback HTTP (chat completions,
 * then an RL training job polled to its end).
 *
 * Run: `npx tsx bench/agent-context.ts [--groups 8] [--rollouts 8] [--max-tokens 48]`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ChatCompletionMessageParam, ChatCompletionRequestBody, TrajectoryGroup } from 'policyloop/schema';
import { createBpeTokenizer, parseBpeMerges } from '../src/engine/bpe.js';
import { renderPrompt } from '../src/engine/chat-template.js';
import { AGENT_CHAT, TINY_CHAT, createEngine, decodeTokens, parameterCount } from '../src/engine/index.js';
import type { Engine, ModelConfig, PolicyRef } from '../src/engine/index.js';
import { tokenizerOf } from '../src/engine/model-config.js';
import { BYTE_TOKENIZER } from '../src/engine/tokenizer.js';
import { startTestService } from '../src/testing/index.js';
import { AGENT_TOOLS, agentMessages } from '../test/engine/support/agent-prompt.js';
import { readFileSync } from 'node:fs';
import { BPE_MERGES_URL } from '../src/engine/bpe.js';

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const GROUPS = option('--groups', 8);
const ROLLOUTS = option('--rollouts', 8);
const MAX_TOKENS = option('--max-tokens', 48);

console.log('# agent context: a system prompt, three tools, four turns');
console.log(
  `machine: ${os.cpus().length}x ${os.cpus()[0]?.model ?? 'cpu'}, node ${process.version}, ${os.platform()} ${os.release()}, load average ${os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ')}`,
);

// Tokens per character.
const byteIds = renderPrompt(agentMessages(0), AGENT_TOOLS, BYTE_TOKENIZER);
const text = decodeTokens(byteIds);
const bpe = tokenizerOf(AGENT_CHAT);
const bpeIds = renderPrompt(agentMessages(0), AGENT_TOOLS, bpe);
console.log(`rendered prompt: ${text.length} characters`);
console.log(
  `byte tokenizer (tiny-chat, small-chat): ${byteIds.length} tokens, ${(byteIds.length / text.length).toFixed(3)} tokens/char (baseline)`,
);
console.log(
  `bpe tokenizer (agent-chat, ${bpe.vocabularySize} tokens): ${bpeIds.length} tokens, ${(bpeIds.length / text.length).toFixed(3)} tokens/char, ${(byteIds.length / bpeIds.length).toFixed(2)}x fewer tokens`,
);
{
  const merges = parseBpeMerges(readFileSync(BPE_MERGES_URL, 'utf8')).merges;
  let cold = Number.POSITIVE_INFINITY;
  let warm = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 20; round += 1) {
    const fresh = createBpeTokenizer(merges); // empty piece cache
    let started = performance.now();
    fresh.encodeText(text);
    cold = Math.min(cold, performance.now() - started);
    started = performance.now();
    fresh.encodeText(text);
    warm = Math.min(warm, performance.now() - started);
  }
  console.log(
    `bpe encode of the ${text.length}-character prompt: ${cold.toFixed(2)} ms cold, ${warm.toFixed(2)} ms warm (best of 20)`,
  );
}

interface StepTiming {
  readonly sampleSeconds: number;
  readonly trainSeconds: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly trainedTokens: number;
  /** Mean of sampled minus trained logprob: ~0 when training sees what sampling saw. */
  readonly klDiv: number;
}

async function rlStep(
  engine: Engine,
  config: ModelConfig,
  messagesOf: (group: number) => ChatCompletionMessageParam[],
  withTools: boolean,
  maxTokens: number,
  directory: string,
): Promise<StepTiming> {
  const policy: PolicyRef = { baseModel: config.id, checkpointPath: null, key: config.id };
  const request = (group: number): ChatCompletionRequestBody =>
    ({
      model: config.id,
      messages: messagesOf(group),
      ...(withTools ? { tools: AGENT_TOOLS } : {}),
      n: ROLLOUTS,
      max_tokens: maxTokens,
      temperature: 1,
      seed: group,
      logprobs: true,
    }) as ChatCompletionRequestBody;
  await engine.chatCompletion(policy, { ...request(0), n: 1, max_tokens: 1 }); // weights and kernels
  let started = performance.now();
  const results = await Promise.all(
    Array.from({ length: GROUPS }, (_, group) => engine.chatCompletion(policy, request(group))),
  );
  const sampleSeconds = (performance.now() - started) / 1000;
  const groups: TrajectoryGroup[] = results.map((result, group) => ({
    trajectories: result.choices.map((choice, index) => ({
      messages_and_choices: [...messagesOf(group), choice],
      ...(withTools ? { tools: AGENT_TOOLS } : {}),
      reward: index % 2,
    })),
  })) as TrajectoryGroup[];
  started = performance.now();
  const { metrics } = await engine.train(
    {
      kind: 'rl',
      policy,
      outputPath: path.join(directory, config.id.replace('/', '-')),
      step: 1,
      trajectoryGroups: groups,
      config: null,
    },
    { onEvent: () => undefined },
  );
  const trainSeconds = (performance.now() - started) / 1000;
  return {
    sampleSeconds,
    trainSeconds,
    promptTokens: results.reduce((sum, result) => sum + result.usage.prompt_tokens, 0) / GROUPS,
    completionTokens: results.reduce((sum, result) => sum + result.usage.completion_tokens, 0),
    trainedTokens: metrics['num_trainable_tokens'] ?? 0,
    klDiv: metrics['kl_div'] ?? Number.NaN,
  };
}

const engine = await createEngine();
const directory = await mkdtemp(path.join(os.tmpdir(), 'policyloop-agent-context-'));
try {
  const report = (label: string, config: ModelConfig, timing: StepTiming): void =>
    console.log(
      `${label} (${parameterCount(config)} parameters, context ${config.contextLength}): prompts ${timing.promptTokens.toFixed(0)} tokens, ` +
        `${timing.completionTokens} completion tokens, ${timing.trainedTokens} trained; sample ${timing.sampleSeconds.toFixed(1)} s + ` +
        `train ${timing.trainSeconds.toFixed(1)} s = ${(timing.sampleSeconds + timing.trainSeconds).toFixed(1)} s (kl_div ${timing.klDiv.toExponential(1)})`,
    );
  console.log(`RL step: ${GROUPS} groups x ${ROLLOUTS} rollouts, up to ${MAX_TOKENS} new tokens each`);
  const tiny = await rlStep(
    engine,
    TINY_CHAT,
    (group) => [{ role: 'user', content: `word${group}` }],
    false,
    MAX_TOKENS,
    directory,
  );
  report(`  ${TINY_CHAT.id}, demo prompts (baseline)`, TINY_CHAT, tiny);
  const agent = await rlStep(engine, AGENT_CHAT, agentMessages, true, MAX_TOKENS, directory);
  report(`  ${AGENT_CHAT.id}, agent prompts`, AGENT_CHAT, agent);
  const ratio = (agent.sampleSeconds + agent.trainSeconds) / (tiny.sampleSeconds + tiny.trainSeconds);
  console.log(`  agent step / tiny step: ${ratio.toFixed(0)}x; load average now ${os.loadavg()[0]?.toFixed(1)}`);
} finally {
  await engine.close();
  await rm(directory, { recursive: true, force: true });
}

// The same agent step through the local service (HTTP, job queue, checkpoint bookkeeping).
{
  const service = await startTestService();
  try {
    const call = async (method: string, route: string, body?: unknown): Promise<Record<string, unknown>> => {
      const response = await fetch(`${service.baseURL}${route}`, {
        method,
        headers: { authorization: `Bearer ${service.apiKey}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as Record<string, unknown>;
    };
    const model = await call('POST', '/preview/models', {
      project: 'bench',
      name: 'agent',
      base_model: AGENT_CHAT.id,
    });
    const name = `wandb-artifact:///${String(model['entity'])}/${String(model['project'])}/${String(model['name'])}`;
    const body = (group: number, n: number, maxTokens: number) => ({
      model: name,
      messages: agentMessages(group),
      tools: AGENT_TOOLS,
      n,
      max_tokens: maxTokens,
      temperature: 1,
      seed: group,
      logprobs: true,
    });
    await call('POST', '/chat/completions', body(0, 1, 1));
    let started = performance.now();
    const results = await Promise.all(
      Array.from({ length: GROUPS }, (_, group) =>
        call('POST', '/chat/completions', body(group, ROLLOUTS, MAX_TOKENS)),
      ),
    );
    const sampleSeconds = (performance.now() - started) / 1000;
    started = performance.now();
    const job = await call('POST', '/preview/training-jobs', {
      model_id: model['id'],
      trajectory_groups: results.map((result, group) => ({
        trajectories: (result['choices'] as unknown[]).map((choice, index) => ({
          messages_and_choices: [...agentMessages(group), choice],
          tools: AGENT_TOOLS,
          reward: index % 2,
        })),
      })),
    });
    let after = '';
    let ended = false;
    while (!ended) {
      const page = await call(
        'GET',
        `/preview/training-jobs/${String(job['id'])}/events?limit=100${after ? `&after=${after}` : ''}`,
      );
      for (const event of page['data'] as { id: string; type: string; data: unknown }[]) {
        after = event.id;
        if (event.type === 'training_failed') throw new Error(`training failed: ${JSON.stringify(event.data)}`);
        if (event.type === 'training_ended') ended = true;
      }
      if (!ended) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const trainSeconds = (performance.now() - started) / 1000;
    console.log(
      `  ${AGENT_CHAT.id} through the local service: sample ${sampleSeconds.toFixed(1)} s + train ${trainSeconds.toFixed(1)} s = ${(sampleSeconds + trainSeconds).toFixed(1)} s; load average now ${os.loadavg()[0]?.toFixed(1)}`,
    );
  } finally {
    await service.close();
  }
}
