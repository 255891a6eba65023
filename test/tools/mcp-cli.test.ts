/**
 * `policyloop eval` on MCP environments, through the real bin: a server that cannot start is a
 * usage error naming it (exit 2, before any rollout), and Ctrl-C during the rollouts ends the
 * command (exit 130) with no server process left.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { killChildren, startCli } from '../cli/support/run-cli.js';
import { eventually, MARK_VARIABLE, markedProcesses, newMark } from './support/mcp-harness.js';

const fixtures = path.join(import.meta.dirname, 'fixtures');
const folders: string[] = [];

afterEach(async () => {
  killChildren();
  for (const folder of folders.splice(0)) await rm(folder, { recursive: true, force: true });
});

async function folder(): Promise<string> {
  const made = await mkdtemp(path.join(tmpdir(), 'mcp-cli-'));
  folders.push(made);
  return made;
}

describe('policyloop eval on an MCP environment', () => {
  it('refuses an environment whose server does not start: exit 2, the server named, no result written', async () => {
    const dir = await folder();
    const run = startCli([
      'eval',
      path.join(fixtures, 'missing-server-environment.ts'),
      '-m',
      'policyloop/tiny-chat',
      '--data-dir',
      path.join(dir, 'data'),
      '--out',
      path.join(dir, 'out'),
    ]);
    const { code, stderr } = await run.done;
    expect(code, stderr).toBe(2);
    expect(stderr).toMatch(
      /MCP server `ghost` could not start: the command `policyloop-missing-mcp-server` was not found/,
    );
  });

  it('Ctrl-C during the rollouts: exit 130 and no server process left', async () => {
    const dir = await folder();
    const mark = newMark();
    // No --max-tokens: agent-chat samples long replies, so the rollouts (and their servers) are in flight.
    const run = startCli(
      [
        'eval',
        path.join(fixtures, 'marked-memory-environment.ts'),
        '-m',
        'policyloop/agent-chat',
        '-c',
        '2',
        '--data-dir',
        path.join(dir, 'data'),
        '--out',
        path.join(dir, 'out'),
      ],
      { [MARK_VARIABLE]: mark },
    );
    const servers = (): number[] => markedProcesses(mark).filter((pid) => pid !== run.child.pid);
    expect(await eventually(() => servers().length >= 2, 60_000)).toBe(true);
    run.child.kill('SIGINT');
    const { code, stderr } = await run.done;
    expect(code, stderr).toBe(130);
    expect(stderr).toMatch(/interrupted/);
    expect(servers()).toEqual([]);
  });
});
