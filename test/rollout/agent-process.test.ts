/**
 * `context.endpoint.spawn()`, against the real local service: an agent process that calls its
 * rollout's endpoint and prints a JSON reward hands that reward back; a child that exits non-zero
 * fails its rollout (retried, counted in the exception budget, its stderr in the error); a gather
 * that is aborted, and a child that outlives its `timeout`, kill the child and the grandchild it
 * started (their pids are gone, a grandchild that ignores SIGTERM included).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  AgentProcessError,
  APIUserAbortError,
  ExceptionBudgetExceededError,
  gatherTrajectoryGroups,
  InvalidArgumentError,
  isChoice,
  LocalBackend,
  TrainableModel,
} from 'policyloop';

let dataDir: string;
let backend: LocalBackend;
let model: TrainableModel;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'policyloop-agent-process-'));
  backend = await LocalBackend.start({ dataDir });
  model = new TrainableModel({ project: 'endpoint', name: 'spawn', baseModel: 'policyloop/tiny-chat' });
  await model.register(backend);
});
/** Every pid a test's child wrote: killed after the suite if a failing test left one running. */
const started: number[] = [];
afterAll(async () => {
  for (const pid of started.filter(alive)) process.kill(pid, 'SIGKILL');
  await model?.close();
  await backend?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

/** An agent as a Node script: calls its endpoint once, then prints a log line and its reward as JSON. */
const AGENT = `
import { readFileSync } from 'node:fs';
const input = readFileSync(0, 'utf8');
const response = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
  body: JSON.stringify({ model: 'gpt-4.1', messages: [{ role: 'user', content: input }], max_tokens: 3 }),
});
const reply = (await response.json()).choices[0].message.content;
console.log('agent: replied ' + JSON.stringify(reply));
console.log(JSON.stringify({ reward: input.length / 10, status: response.status, extra: process.env.AGENT_EXTRA ?? null,
  wandb: process.env.WANDB_API_KEY ?? null }));
console.log('{not json');
`;

/** Whether a process is running (a zombie waiting for its parent to reap it counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // /proc/<pid>/stat: "pid (name) S ...": Z is a zombie.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return process.platform !== 'linux';
  }
}

/**
 * A child that starts a grandchild (which ignores SIGTERM), writes both pids to `file`, and waits
 * forever.
 */
function parentOfGrandchild(file: string): string[] {
  const grandchild = "process.on('SIGTERM', () => {}); setInterval(() => {}, 1000);";
  const script = `
const { spawn } = require('node:child_process');
const grandchild = spawn(process.execPath, ['-e', ${JSON.stringify(grandchild)}], { stdio: 'ignore' });
require('node:fs').writeFileSync(${JSON.stringify(file)}, JSON.stringify([process.pid, grandchild.pid]));
setInterval(() => {}, 1000);
`;
  return ['--input-type=commonjs', '-e', script];
}

/** Waits until `file` holds the pids the child wrote. */
async function pidsIn(file: string): Promise<number[]> {
  return vi.waitFor(
    async () => {
      const pids = JSON.parse(await readFile(file, 'utf8')) as number[];
      if (pids.length !== 2) throw new Error('not yet');
      started.push(...pids);
      return pids;
    },
    { timeout: 60_000, interval: 50 },
  );
}

describe('context.endpoint.spawn', () => {
  it("runs the agent with the endpoint's environment and hands back the reward it printed as JSON", async () => {
    process.env['WANDB_API_KEY'] = 'wandb-secret-of-the-test';
    try {
      const groups = await gatherTrajectoryGroups(
        ['cat', 'horse'],
        async (word, context) => {
          const run = await context.endpoint.spawn<{ reward: number; status: number; extra: string; wandb: null }>(
            process.execPath,
            ['--input-type=module', '-e', AGENT],
            { input: word, env: { AGENT_EXTRA: `extra-${word}`, WANDB_API_KEY: undefined } },
          );
          expect(run.exitCode).toBe(0);
          expect(run.stdout).toMatch(/^agent: replied /m);
          expect(run.result).toEqual({ reward: word.length / 10, status: 200, extra: `extra-${word}`, wandb: null });
          return { reward: run.result?.reward ?? 0 };
        },
        { groupSize: 2, concurrency: 4, model },
      );
      expect(groups.map((group) => group.trajectories.map((trajectory) => trajectory.reward))).toEqual([
        [0.3, 0.3],
        [0.5, 0.5],
      ]);
      // The child's call went through the rollout's endpoint: recorded in its own trajectory, with logprobs.
      for (const [index, group] of groups.entries()) {
        for (const trajectory of group.trajectories) {
          const choices = trajectory.messages_and_choices.filter(isChoice);
          expect(choices).toHaveLength(1);
          expect(choices[0]?.logprobs?.content?.length ?? 0).toBeGreaterThan(0);
          expect(trajectory.messages_and_choices[0]).toMatchObject({
            role: 'user',
            content: ['cat', 'horse'][index],
          });
        }
      }
    } finally {
      delete process.env['WANDB_API_KEY'];
    }
  });

  it('resolves result undefined when no stdout line is a JSON object', async () => {
    const [group] = await gatherTrajectoryGroups(
      ['x'],
      async (_word, context) => {
        const run = await context.endpoint.spawn(process.execPath, ['-e', "console.log('[1]'); console.log('42')"]);
        return { metadata: { result: run.result === undefined ? 'none' : 'some' } };
      },
      { model },
    );
    expect(group?.trajectories[0]?.metadata['result']).toBe('none');
  });

  it('fails a rollout whose agent exits non-zero, retries it, and counts it in the exception budget', async () => {
    const crash = ['-e', "process.stderr.write('agent: the tool server is down\\n'); process.exit(3)"];
    const attempts: number[] = [];
    // Attempt 0 of rollout 0 crashes, its retry succeeds; rollout 1 crashes on every attempt.
    const groups = await gatherTrajectoryGroups(
      ['task'],
      async (_task, context) => {
        attempts.push(context.index);
        const crashes = context.index === 1 || context.attempt === 0;
        await context.endpoint.spawn(process.execPath, crashes ? crash : ['-e', '']);
        return { reward: 1 };
      },
      { groupSize: 2, maxRetries: 1, retryDelay: 0, maxExceptions: 1, model },
    );
    expect(attempts.sort()).toEqual([0, 0, 1, 1]);
    const [group] = groups;
    expect(group?.trajectories).toHaveLength(1);
    expect(group?.exceptions).toHaveLength(1);
    expect(group?.exceptions?.[0]).toMatchObject({ type: 'AgentProcessError' });
    expect(group?.exceptions?.[0]?.message).toMatch(/exited with code 3; stderr:\nagent: the tool server is down/);

    // Past the budget the gather stops, and the error carries the child's evidence.
    const failure = await gatherTrajectoryGroups(
      ['task'],
      async (_task, context) => {
        await context.endpoint.spawn(process.execPath, crash);
      },
      { model },
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ExceptionBudgetExceededError);
    const cause = (failure as ExceptionBudgetExceededError).cause;
    expect(cause).toBeInstanceOf(AgentProcessError);
    expect(cause).toMatchObject({ command: process.execPath, exitCode: 3, signal: null, retryable: true });
    expect((cause as AgentProcessError).stderr).toBe('agent: the tool server is down\n');
  });

  it('refuses a misspelt option before starting anything, naming the nearest one', async () => {
    const [group] = await gatherTrajectoryGroups(
      ['x'],
      async (_word, context) => {
        const refused = await context.endpoint
          .spawn(process.execPath, ['-e', ''], { killgrace: 10 } as never)
          .catch((error: unknown) => error);
        return { metadata: { refused: refused instanceof InvalidArgumentError ? refused.message : 'started' } };
      },
      { model },
    );
    expect(group?.trajectories[0]?.metadata['refused']).toMatch(
      /Unknown option `killgrace`; did you mean `killGrace`\?/,
    );
  });

  it('rejects with AgentProcessError when the command cannot be started', async () => {
    const failure = await gatherTrajectoryGroups(
      ['task'],
      async (_task, context) => {
        await context.endpoint.spawn('policyloop-no-such-agent-binary', ['--flag']);
      },
      { model },
    ).catch((error: unknown) => (error as ExceptionBudgetExceededError).cause);
    expect(failure).toBeInstanceOf(AgentProcessError);
    expect((failure as AgentProcessError).message).toMatch(
      /^Agent process `policyloop-no-such-agent-binary --flag` could not be started \(.*ENOENT/,
    );
  });

  it('kills the agent and the grandchild it started when the gather is aborted', async () => {
    const file = path.join(dataDir, 'aborted-pids.json');
    const controller = new AbortController();
    const gather = gatherTrajectoryGroups(
      ['task'],
      async (_task, context) => {
        await context.endpoint.spawn(process.execPath, parentOfGrandchild(file), { killGrace: 200 });
      },
      { model, signal: controller.signal },
    ).catch((error: unknown) => error);
    const pids = await pidsIn(file);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    controller.abort(new Error('stop the run'));
    expect(await gather).toBeInstanceOf(APIUserAbortError);
    await vi.waitFor(() => expect(pids.filter(alive)).toEqual([]), { timeout: 30_000, interval: 50 });
  });

  it('kills an agent that outlives its timeout, with its grandchild, and fails the rollout saying so', async () => {
    const file = path.join(dataDir, 'timed-out-pids.json');
    let error: unknown;
    await gatherTrajectoryGroups(
      ['task'],
      async (_task, context) => {
        try {
          await context.endpoint.spawn(process.execPath, parentOfGrandchild(file), { timeout: 1000, killGrace: 200 });
        } catch (caught) {
          error = caught;
        }
      },
      { model },
    );
    const pids = await pidsIn(file);
    expect(error).toBeInstanceOf(AgentProcessError);
    expect((error as AgentProcessError).message).toMatch(/did not exit within its timeout of 1000 ms and was killed/);
    await vi.waitFor(() => expect(pids.filter(alive)).toEqual([]), { timeout: 30_000, interval: 50 });
  });
});
