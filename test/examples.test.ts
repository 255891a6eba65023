/**
 * Every example runs as a user runs it (`npx tsx examples/<name>.ts`), offline, against the
 * embedded local service, and ends with its final report. Each runs in its own empty working
 * directory (the examples keep their data under `./.policyloop`); tsx gets this repository's
 * tsconfig, which maps `policyloop` to the sources. The demo has its own test (`demo.test.ts`).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '..');
// `--import tsx` resolves from the working directory, which is empty: name this repository's tsx.
const tsx = pathToFileURL(path.join(root, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

async function runExample(name: string, extra: NodeJS.ProcessEnv = {}, args: readonly string[] = []): Promise<string> {
  const cwd = await mkdtemp(path.join(tmpdir(), `policyloop-example-${name.replaceAll('/', '-')}-`));
  try {
    const environment: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extra };
    // The hosted example must take its offline path here, whatever the developer's shell holds.
    delete environment['WANDB_API_KEY'];
    delete environment['POLICYLOOP_API_KEY'];
    delete environment['OPENAI_API_KEY'];
    const { stdout } = await run(
      process.execPath,
      ['--import', tsx, path.join(root, 'examples', `${name}.ts`), ...args],
      {
        cwd,
        env: { ...environment, TSX_TSCONFIG_PATH: path.join(root, 'tsconfig.json') },
        timeout: 300_000,
      },
    );
    return stdout;
  } finally {
    await rm(cwd, { recursive: true, force: true });
  }
}

describe('examples', () => {
  it('quickstart trains 12 steps and says where the history is', async () => {
    const output = await runExample('quickstart');
    expect(output.match(/^step \d+: mean reward/gm)).toHaveLength(12);
    expect(output).toMatch(/^history: .*quickstart.*history\.jsonl$/m);
  }, 300_000);

  it('scripted-trainer tests a training script on the scripted backend, its own assertions passing', async () => {
    const output = await runExample('scripted-trainer');
    expect(output).toMatch(/^train\/reward by step: 0\.25 0\.25 0\.50 0\.75$/m);
    expect(output).toMatch(/^kept checkpoints: 4$/m);
    expect(output).toMatch(/^trained 4 steps on the scripted backend in \d+ ms$/m);
  }, 300_000);

  it('environments/train warms up and trains on the uppercase environment, each rubric mean on its step line, then prints the eval comparison (a short run)', async () => {
    const output = await runExample('environments/train', { POLICYLOOP_EXAMPLE_STEPS: '2' });
    expect(output).toMatch(/^SFT warm start: step 1$/m);
    expect(output).toMatch(
      /^validation at step 1: reward \d\.\d{3}, characters \d\.\d{3}, capitals \d\.\d{3}, exact \d\.\d{3}, num_turns 1\.000, tool_calls 0\.000$/m,
    );
    expect(
      output.match(/^step [23]: reward \d\.\d{3}, characters \d\.\d{3}, capitals \d\.\d{3}, exact \d\.\d{3}, /gm),
    ).toHaveLength(2);
    expect(output).toMatch(/^trained uppercase to step 3; history in .*history\.jsonl$/m);
    expect(output).toMatch(
      /^compare: npx policyloop eval examples\/environments\/uppercase\.ts --data-dir \.policyloop\/environments --model policyloop\/tiny-chat --model environments\/uppercase:step3 -n 16 -r 4 --threshold 1$/m,
    );
  }, 300_000);

  it('environments/train loads the calculator environment by path and trains on it with its tools (a short run)', async () => {
    const file = path.join(root, 'examples', 'environments', 'calculator.ts');
    const output = await runExample('environments/train', { POLICYLOOP_EXAMPLE_STEPS: '1' }, [
      file,
      'policyloop/agent-chat',
    ]);
    expect(output).toMatch(
      /^validation at step 0: reward \d\.\d{3}, correct \d\.\d{3}, numeric \d\.\d{3}, used_tool \d\.\d{3}, /m,
    );
    expect(output).toMatch(
      /^(trained calculator to step 1; history in .*history\.jsonl|no learning signal on calculator: .*)$/m,
    );
  }, 300_000);

  it('tool-agent gathers tool-calling rollouts and trains on them', async () => {
    const output = await runExample('tool-agent');
    expect(output).toMatch(/^trained to step \d+; history in .*history\.jsonl$/m);
  }, 300_000);

  it('judge-reward scores groups with the relative judge and trains on the judged rewards', async () => {
    const output = await runExample('judge-reward');
    expect(output).toMatch(/judge_score/);
    expect(output).toMatch(/^trained on the judged groups: step 1$/m);
  }, 300_000);

  it('sft-then-rl warms up with SFT, runs RL, then prunes checkpoints', async () => {
    const output = await runExample('sft-then-rl');
    expect(output).toMatch(/^after SFT \(step 1\): val\/reward \d\.\d{3}$/m);
    expect(output).toMatch(/^kept steps \d+(, \d+)?; deleted \d+ checkpoints$/m);
  }, 300_000);

  it('hosted runs on the local service when no WANDB_API_KEY is set', async () => {
    const output = await runExample('hosted');
    expect(output).toMatch(/^step \d+ on the local service; history in .*history\.jsonl$/m);
  }, 300_000);
  it('process-agent trains an agent that runs as a child process through its rollout endpoint (a short run)', async () => {
    const output = await runExample('process-agent', { POLICYLOOP_EXAMPLE_STEPS: '2' });
    expect(output.match(/^step [12]: mean reward \d\.\d{3}$/gm)).toHaveLength(2);
    expect(output).toMatch(/^trained to step 2 \(\d+ agent processes\); history in .*history\.jsonl$/m);
  }, 300_000);
  it('ai-sdk-agent warms up with SFT, then the model drives the AI SDK agent through RL steps (a short run)', async () => {
    // The full run (60 steps, minutes) is the curve of docs/integrations.md; 2 steps show the loop runs.
    const output = await runExample('ai-sdk-agent', { POLICYLOOP_EXAMPLE_STEPS: '2' });
    expect(output).toMatch(/^warm start: SFT on 6 demonstrations x 30 \(step 1\), \d+ s$/m);
    expect(
      output.match(/^RL step [12]\/2: success [01]\.\d{3}, reward \d\.\d{3}( \(no gradient: skipped\))?, \d+ s$/gm),
    ).toHaveLength(2);
    expect(output).toMatch(/^after 2 RL steps: success [01]\.\d{3}, \d+ s$/m);
  }, 300_000);
  it('qwen-agent serves the tiny Qwen3, warms it up with SFT into writing the tool call, then runs RL steps (a short run)', async () => {
    // The full run is the curve of docs/engine.md (Real models); 1 RL step shows the loop runs.
    const output = await runExample('qwen-agent', { POLICYLOOP_EXAMPLE_STEPS: '1' });
    expect(output).toMatch(/^random Qwen3: greedy reward 0\.000, \d+ s$/m);
    // 50 SFT passes: every greedy reply calls `weather` for Paris (0.5 each); sampled, Bern now and then.
    expect(output).toMatch(
      /^warm start: SFT x 50 \(step 1\): sampled reward [01]\.\d{3} \(Paris \d+, Bern \d+, other \d+, no call \d+\), greedy reward 0\.500, \d+ s$/m,
    );
    expect(output).toMatch(
      /^RL step 1\/1: rollout reward [01]\.\d{3} \(Paris \d+, Bern \d+, other \d+, no call \d+\)( \(no gradient: skipped\))?(, kl_div -?[\d.]+(e[+-]?\d+)?)?, \d+ s$/m,
    );
    expect(output).toMatch(
      /^after 1 RL steps: sampled reward [01]\.\d{3} \(.*\), greedy reward [01]\.\d{3}; questions never trained on: sampled reward [01]\.\d{3} \(.*\), \d+ s$/m,
    );
  }, 300_000);
  it('handoff-agent warms up on recorded handoff runs, then RLTrainer trains the Agents SDK agents (a short run)', async () => {
    // The full run is the curve of docs/recipes.md. Here 2 scenarios and 40 warm-start passes
    // (40 optimizer steps, as in the 40-pass run there, where 0.59 of the rollouts handed off),
    // then 2 RL steps: the loop runs on rollouts whose rewards differ (20 passes over 8 scenarios
    // left every reward 0, and the run stopped with NoLearningSignalError).
    const output = await runExample('handoff-agent', {
      POLICYLOOP_EXAMPLE_STEPS: '2',
      POLICYLOOP_WARM_EPOCHS: '40',
      POLICYLOOP_EXAMPLE_SCENARIOS: '2',
    });
    expect(output).toMatch(/^warm start: SFT on 2 handoff runs x 40 \(step 1\), \d+ s$/m);
    expect(output).toMatch(/^trained to step 3 \(\d RL steps, \d+ failed rollouts, \d skipped batches\), \d+ s$/m);
  }, 300_000);
  for (const name of ['ai-sdk', 'openai-agents', 'anthropic', 'langchain', 'mastra']) {
    it(`${name} runs an agent on its framework's defaults, records every model call with logprobs and trains on them`, async () => {
      const output = await runExample(name);
      expect(output.match(/^recorded [1-9]\d*, [1-9]\d* chat completions per rollout, with logprobs$/gm)).toHaveLength(
        2,
      );
      expect(output).toMatch(/^trained to step 1; history in .*history\.jsonl$/m);
    }, 300_000);
  }
  it('mcp/train trains on the MCP notes environment (memory and filesystem per rollout, everything over HTTP)', async () => {
    const output = await runExample('mcp/train', { POLICYLOOP_EXAMPLE_STEPS: '2' });
    expect(output.match(/^step \d+: reward /gm)).toHaveLength(2);
    expect(output).toMatch(/^trained to step 2 with MCP tools \(\d+ rollouts\)$/m);
  }, 300_000);

  it("mcp/agents-sdk runs an Agents SDK agent on the rollout's MCP servers through serveMcp", async () => {
    const output = await runExample('mcp/agents-sdk');
    expect(output).toMatch(/^the agent was offered create_entities, read_graph over MCP; rewards /m);
  }, 300_000);
});
