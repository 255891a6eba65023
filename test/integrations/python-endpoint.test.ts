/**
 * An agent in another process, in Python: the `openai` package from PyPI, unchanged, configured
 * only by `context.endpoint.env` (`OPENAI_BASE_URL`, `OPENAI_API_KEY`), against the real local
 * service. 16 child processes at once make chat completions and Responses calls, plain and
 * streamed; each call lands in its own rollout's trajectory (not mixed), and the groups train.
 *
 * The suite finds a Python >= 3.12 (python3.13, python3.12 or python3 on PATH, or pyenv's) and
 * builds a venv from python/requirements.txt in .cache/endpoint-python-venv, or where
 * POLICYLOOP_ENDPOINT_VENV says (reused while the file's hash matches). Without such a Python, or without a package index to build the venv from,
 * it skips with one line saying why, unless POLICYLOOP_REQUIRE_PYTHON=1 (CI sets it in .ci/run),
 * which makes either a failure.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AgentProcessError,
  choicesOf,
  ExceptionBudgetExceededError,
  gatherTrajectoryGroups,
  isChoice,
  LocalBackend,
  TrainableModel,
  type Trajectory,
} from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { runChild } from '../support/run-child.js';
import { ensureVenv, findPython, packageIndexProblem, venvIsCurrent } from '../support/python-venv.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const HERE = path.join(import.meta.dirname, 'python');
const AGENT = path.join(HERE, 'endpoint_agent.py');
const REQUIRED = process.env['POLICYLOOP_REQUIRE_PYTHON'] === '1';
const WORDS = ['apple', 'brick', 'cloud', 'delta', 'ember', 'flint', 'grove', 'harbor'];

const found = findPython({ min: [3, 12], below: [3, 15], purpose: 'the openai package' });
const VENV = process.env['POLICYLOOP_ENDPOINT_VENV'] ?? path.join(ROOT, '.cache', 'endpoint-python-venv');
const REQUIREMENTS = path.join(HERE, 'requirements.txt');
let skipReason = 'reason' in found ? found.reason : undefined;
if (skipReason === undefined && 'python' in found && !venvIsCurrent(VENV, REQUIREMENTS, found))
  skipReason = await packageIndexProblem('openai');
if (skipReason !== undefined) {
  if (REQUIRED) throw new Error(`POLICYLOOP_REQUIRE_PYTHON=1 but the Python endpoint suite cannot run: ${skipReason}`);
  console.log(`Python endpoint suite skipped: ${skipReason}`);
}

/** The TypeScript and Python snippets of docs/integrations.md's "Agents in other processes", as printed. */
async function documentedSnippets(): Promise<{ typescript: string; python: string }> {
  const doc = await readFile(path.join(ROOT, 'docs', 'integrations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Agents in other processes'));
  const typescript = /```ts\n([\s\S]*?)```/.exec(section)?.[1];
  const python = /```python\n([\s\S]*?)```/.exec(section)?.[1];
  if (typescript === undefined || python === undefined) throw new Error('docs/integrations.md lost its snippets');
  return { typescript, python };
}

/** The history files under `directory`, found at any depth. */
async function historyFiles(directory: string): Promise<string[]> {
  const names = await readdir(directory, { recursive: true });
  return names.filter((name) => name.endsWith('history.jsonl')).map((name) => path.join(directory, name));
}

const TITLE = 'a Python agent on the openai package through context.endpoint';
describe.skipIf(skipReason !== undefined)(
  skipReason === undefined ? TITLE : `${TITLE} (skipped: ${skipReason})`,
  () => {
    let python: string;
    let dataDir: string;
    let backend: LocalBackend;
    let model: TrainableModel;

    beforeAll(async () => {
      if (!('python' in found)) throw new Error(found.reason);
      python = (await ensureVenv({ python: found, venv: VENV, requirements: REQUIREMENTS })).python;
      dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-python-endpoint-'));
      backend = await LocalBackend.start({ dataDir });
      model = new TrainableModel({ project: 'endpoint', name: 'python', baseModel: 'policyloop/tiny-chat' });
      await model.register(backend);
    }, 30 * 60_000);
    afterAll(async () => {
      await model?.close();
      await backend?.close();
      if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
    });

    it('records 16 Python processes at once, chat completions and Responses, each in its own rollout, and trains', async () => {
      const groups = await gatherTrajectoryGroups(
        WORDS,
        async (word, context) => {
          const { WANDB_API_KEY: _omitted, ...inherited } = process.env;
          const env = { ...inherited, ...context.endpoint.env, PYTHONUNBUFFERED: '1' };
          const output = await runChild(python, [AGENT, word], env, { signal: context.signal });
          const result = JSON.parse(output) as Record<string, unknown>;
          // The fresh model mostly runs to the 4-token limit (`length`, `incomplete`); now and then it ends first.
          expect(result).toMatchObject({
            word,
            stream_first: 'response.created',
            models: [model.inferenceName()],
            wandb_key: null,
          });
          expect(['length', 'stop']).toContain(result['chat']);
          expect(['incomplete', 'completed']).toContain(result['response']);
          expect(['incomplete', 'completed']).toContain(result['stream_status']);
          expect(result['stream_last']).toBe(`response.${String(result['stream_status'])}`);
          expect(result['chat_chunks']).toBeGreaterThan(1);
          return { reward: context.index };
        },
        { groupSize: 2, concurrency: 16, model },
      );
      for (const [groupIndex, group] of groups.entries()) {
        expect(group.exceptions ?? []).toEqual([]);
        const word = WORDS[groupIndex] as string;
        for (const trajectory of group.trajectories as Trajectory[]) {
          const items = [
            ...trajectory.messages_and_choices,
            ...trajectory.additional_histories.flatMap((history) => history.messages_and_choices),
          ];
          const users = items.flatMap((item) =>
            !isChoice(item) && item.role === 'user' ? [String(item.content)] : [],
          );
          expect(users.sort()).toEqual([`Again ${word}.`, `Once more ${word}.`, `Say ${word}.`, `Spell ${word}.`]);
          const choices = items.filter(isChoice) as Choice[];
          expect(choices).toHaveLength(4);
          for (const choice of choices) expect(choice.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
        }
      }
      const { step } = await model.train(groups);
      expect(step).toBe(1);
    }, 300_000);

    it('hands the reward the documented agent.py prints back through context.endpoint.spawn()', async () => {
      const { python: agent } = await documentedSnippets();
      const directory = await mkdtemp(path.join(tmpdir(), 'policyloop-python-snippet-'));
      try {
        await writeFile(path.join(directory, 'agent.py'), agent);
        const groups = await gatherTrajectoryGroups(
          ['cat', 'dog'],
          async (task, context) => {
            const { result } = await context.endpoint.spawn<{ reply: string; reward: number }>(
              python,
              ['agent.py', task],
              { cwd: directory, env: { WANDB_API_KEY: undefined } },
            );
            return { reward: result?.reward ?? -1, metadata: { reply: result?.reply ?? null } };
          },
          { groupSize: 2, model },
        );
        for (const group of groups) {
          for (const trajectory of group.trajectories) {
            // The child's reward is the share of capitals of the reply it got: the Choice recorded here.
            const reply = String(trajectory.metadata['reply']);
            expect(choicesOf(trajectory).map((choice) => choice.message.content ?? '')).toEqual([reply]);
            const capitals = [...reply].filter((char) => char !== char.toLowerCase()).length;
            expect(trajectory.reward).toBeCloseTo(reply.length === 0 ? 0 : capitals / reply.length, 10);
          }
        }
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    }, 300_000);

    it('runs the documented training script as written (python on PATH), which trains on the rewards its agents print', async () => {
      const { typescript, python: agent } = await documentedSnippets();
      const directory = await mkdtemp(path.join(tmpdir(), 'policyloop-python-script-'));
      try {
        await writeFile(path.join(directory, 'agent.py'), agent);
        await writeFile(path.join(directory, 'train.ts'), typescript);
        // The project is ESM, as the docs require (the script uses top-level await).
        await writeFile(path.join(directory, 'package.json'), JSON.stringify({ type: 'module' }));
        const tsx = pathToFileURL(path.join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;
        const { WANDB_API_KEY: _omitted, ...inherited } = process.env;
        await promisify(execFile)(process.execPath, ['--import', tsx, 'train.ts'], {
          cwd: directory,
          env: {
            ...inherited,
            // `python` is the venv's, as an activated venv has it.
            PATH: `${path.dirname(python)}${path.delimiter}${process.env['PATH'] ?? ''}`,
            TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'),
          },
          timeout: 240_000,
        });
        const [history] = await historyFiles(directory);
        expect(history).toBeDefined();
        const rows = (await readFile(history as string, 'utf8'))
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as Record<string, unknown>);
        // Two RL steps, each with the mean of the rewards the Python agents printed.
        const rewards = rows.flatMap((row) => (typeof row['train/reward'] === 'number' ? [row['train/reward']] : []));
        expect(rewards).toHaveLength(2);
        for (const reward of rewards) expect(reward).toBeGreaterThanOrEqual(0);
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    }, 300_000);

    it('fails the rollout of a Python agent that raises, with its traceback in the error', async () => {
      const directory = await mkdtemp(path.join(tmpdir(), 'policyloop-python-crash-'));
      try {
        await writeFile(
          path.join(directory, 'agent.py'),
          'from openai import OpenAI\nOpenAI()\nraise RuntimeError("the tool server is down")\n',
        );
        const failure = await gatherTrajectoryGroups(
          ['task'],
          async (task, context) => {
            await context.endpoint.spawn(python, ['agent.py', task], { cwd: directory });
          },
          { model },
        ).catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(ExceptionBudgetExceededError);
        const cause = (failure as ExceptionBudgetExceededError).cause as AgentProcessError;
        expect(cause).toBeInstanceOf(AgentProcessError);
        expect(cause.exitCode).toBe(1);
        expect(cause.message).toMatch(/exited with code 1; stderr:\nTraceback/);
        expect(cause.message).toContain('RuntimeError: the tool server is down');
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    }, 300_000);
  },
);
