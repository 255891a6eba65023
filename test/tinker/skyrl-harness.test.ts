/**
 * The harness the Tinker suite stands on (test/support/skyrl-server.ts): SkyRL 0.4.0's Tinker
 * server starts on loopback for a tiny Qwen3 folder, the official tinker 0.25.0 SDK
 * (test/tinker/sdk_reference.py) reads logprobs and runs RL steps against it, a crash and restart
 * keep the state, and close() leaves no process behind.
 *
 * Skips with one line saying why without a Python >= 3.12 (or, while the venv is not built yet, a
 * package index), unless POLICYLOOP_REQUIRE_TINKER=1 (CI), which makes that a failure.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QWEN3_TOKENS, writeTinyQwen3 } from '../../src/engine/hf/tiny-qwen3.js';
import { runSdkReference, type SkyrlServer, skyrlSkipReason, startSkyrlServer } from '../support/skyrl-server.js';

// A loaded 2-core machine took 84 s for the restart test; the first RL step JIT-compiles for ~20 s.
const MINUTE = 60_000;
const skipReason = await skyrlSkipReason();
if (skipReason !== undefined) console.log(`SkyRL harness skipped: ${skipReason}`);

// `<|im_start|>user\nHello, world<|im_end|>\n<|im_start|>assistant\n` in Qwen3's tokenizer.
const PROMPT = [
  QWEN3_TOKENS.imStart,
  872,
  198,
  9707,
  11,
  1879,
  QWEN3_TOKENS.imEnd,
  198,
  QWEN3_TOKENS.imStart,
  77091,
  198,
];
const ITEMS = [
  { promptTokens: PROMPT, completionTokens: [9707, 0, 1, 2, QWEN3_TOKENS.imEnd] },
  { promptTokens: [9707, 11], completionTokens: [1879] },
];

/** Whether a pid is a live process (a zombie waiting to be reaped counts as ended). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? '');
  } catch {
    return false;
  }
}

interface CheckpointList {
  checkpoints: { checkpoint_id: string; checkpoint_type: string; tinker_path: string }[];
}

const TITLE = "SkyRL's Tinker server on loopback, driven by the official tinker SDK";
describe.skipIf(skipReason !== undefined)(
  skipReason === undefined ? TITLE : `${TITLE} (skipped: ${skipReason})`,
  () => {
    let root: string;
    let server: SkyrlServer | undefined;
    let baseLogprobs: number[][];
    let trainedModel: string;

    beforeAll(async () => {
      root = await mkdtemp(path.join(os.tmpdir(), 'policyloop-skyrl-harness-'));
      const modelDir = await writeTinyQwen3(path.join(root, 'tiny-qwen3'));
      // The first run on a machine builds the venv (~6 GB; minutes from a cold uv cache).
      server = await startSkyrlServer({ modelDir, readyTimeoutMs: 4 * MINUTE });
    }, 40 * MINUTE);

    afterAll(async () => {
      await server?.close();
      if (root !== undefined) await rm(root, { recursive: true, force: true });
    });

    it('serves on 127.0.0.1 with its engine ready: the API server and the engine run in one process group', async () => {
      const running = server!;
      expect(running.baseURL).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(running.startup.readySeconds).toBeGreaterThanOrEqual(running.startup.healthSeconds);
      const commands = running.processes().map((entry) => entry.command);
      expect(commands.some((command) => command.includes('-m skyrl.tinker.api'))).toBe(true);
      expect(commands.some((command) => command.includes('-m skyrl.tinker.engine'))).toBe(true);
      const health = await fetch(`${running.baseURL}/api/v1/healthz`);
      expect(await health.json()).toEqual({ status: 'ok' });
      expect(existsSync(running.databaseFile)).toBe(true);
    });

    it(
      "the SDK's logprobs of given completion tokens on the base model: one finite value per token, the same through sampler and trainer",
      async () => {
        const sampler = await runSdkReference(server!, { mode: 'logprobs', items: ITEMS });
        expect(sampler.via).toBe('sampler');
        expect(sampler.results.map((result) => result.completion_logprobs.length)).toEqual(
          ITEMS.map((item) => item.completionTokens.length),
        );
        // SkyRL gives n-1 prompt logprobs for n tokens (no value for the first token).
        expect(sampler.results.map((result) => result.sequence_logprobs_count)).toEqual(
          ITEMS.map((item) => item.promptTokens.length + item.completionTokens.length - 1),
        );
        for (const value of sampler.results.flatMap((result) => result.completion_logprobs)) {
          expect(Number.isFinite(value)).toBe(true);
          expect(value).toBeLessThan(0);
        }
        baseLogprobs = sampler.results.map((result) => result.completion_logprobs);

        // A fresh LoRA adapter starts at zero: its forward pass is the base model's.
        const trainer = await runSdkReference(server!, { mode: 'logprobs', items: ITEMS, via: 'training', rank: 4 });
        expect(trainer.model_id).toMatch(/^model_/);
        trainer.results.forEach((result, index) => {
          const expected = baseLogprobs[index]!;
          expect(result.completion_logprobs).toHaveLength(expected.length);
          result.completion_logprobs.forEach((value, position) => {
            expect(Math.abs(value - expected[position]!)).toBeLessThan(1e-3);
          });
        });
      },
      8 * MINUTE,
    );

    it(
      'the SDK runs RL steps (sample, importance-sampling forward/backward, optim, save) and reports each phase',
      async () => {
        const run = await runSdkReference(server!, {
          mode: 'rl_step',
          promptTokens: PROMPT,
          numSamples: 4,
          maxTokens: 6,
          steps: 2,
          rank: 4,
          learningRate: 1e-3,
        });
        trainedModel = run.model_id;
        expect(run.steps.map((step) => step.step)).toEqual([1, 2]);
        expect(run.steps.map((step) => step.sampler_path)).toEqual([
          `tinker://${run.model_id}/step1`,
          `tinker://${run.model_id}/step2`,
        ]);
        for (const step of run.steps) {
          expect(step.completion_tokens).toHaveLength(4);
          expect(Number.isFinite(step.grad_norm)).toBe(true);
          for (const phase of [
            step.sample_s,
            step.forward_backward_s,
            step.optim_step_s,
            step.save_weights_for_sampler_s,
          ])
            expect(phase).toBeGreaterThan(0);
          expect(step.step_s).toBeGreaterThanOrEqual(step.sample_s + step.forward_backward_s);
        }
      },
      8 * MINUTE,
    );

    it(
      'kill() ends every process at once; restart() serves again on the same URL with the same database and checkpoints',
      async () => {
        const running = server!;
        const pids = running.processes().map((entry) => entry.pid);
        expect(pids.length).toBeGreaterThanOrEqual(2);
        await running.kill();
        expect(running.running).toBe(false);
        expect(pids.filter(alive)).toEqual([]);
        await expect(fetch(`${running.baseURL}/api/v1/healthz`)).rejects.toThrow();

        const startup = await running.restart();
        expect(running.running).toBe(true);
        expect(startup.readySeconds).toBeGreaterThan(0);
        // The database kept the model's checkpoint records, and the checkpoint folder its files.
        const response = await fetch(`${running.baseURL}/api/v1/training_runs/${trainedModel}/checkpoints`);
        expect(response.status).toBe(200);
        const listed = (await response.json()) as CheckpointList;
        expect(listed.checkpoints.map((checkpoint) => checkpoint.checkpoint_id).sort()).toEqual([
          'step0',
          'step1',
          'step2',
        ]);
        expect(existsSync(path.join(running.checkpointsDir, trainedModel, 'sampler_weights', 'step2.tar.gz'))).toBe(
          true,
        );
        // The same weights are served again.
        const again = await runSdkReference(running, { mode: 'logprobs', items: ITEMS });
        again.results.forEach((result, index) => {
          result.completion_logprobs.forEach((value, position) => {
            expect(Math.abs(value - baseLogprobs[index]![position]!)).toBeLessThan(1e-5);
          });
        });
      },
      8 * MINUTE,
    );

    it('close() leaves no process of the server and removes its temporary state', async () => {
      const running = server!;
      const pids = running.processes().map((entry) => entry.pid);
      expect(pids.length).toBeGreaterThanOrEqual(2);
      await running.close();
      expect(pids.filter(alive)).toEqual([]);
      expect(running.processes()).toEqual([]);
      expect(existsSync(running.stateDir)).toBe(false);
      await expect(fetch(`${running.baseURL}/api/v1/healthz`)).rejects.toThrow();
    });
  },
);
