/**
 * `mcpServer` through the tool-source contract, against the official reference servers (real
 * processes, the real SDK): per-rollout isolation and sharing, a filesystem root per rollout,
 * streamable HTTP with a call cut by its timeout, the start's refusals, and the processes left
 * after each way a rollout can end (counted by a marker in their environment).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { InvalidArgumentError, McpServerError, mcpServer } from 'policyloop';
import type { RolloutTools, StartedToolSource, ToolRolloutInfo } from 'policyloop/training';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  eventually,
  freePort,
  type HttpEverything,
  MARK_VARIABLE,
  markedProcesses,
  newMark,
  processGroup,
  referenceServer,
  startHttpEverything,
} from './support/mcp-harness.js';

const node = process.execPath;
const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A rollout's info: its task, a fresh temporary folder (removed after the test), a signal. */
async function rollout(task: unknown, signal = new AbortController().signal): Promise<ToolRolloutInfo> {
  const tempDir = await mkdtemp(path.join(tmpdir(), 'mcp-test-rollout-'));
  cleanups.push(() => rm(tempDir, { recursive: true, force: true }));
  return { task, tempDir, signal };
}

/** Starts a source and closes it after the test. */
async function started(source: ReturnType<typeof mcpServer>): Promise<StartedToolSource> {
  const run = await source.start();
  cleanups.push(() => run.close());
  return run;
}

/** A per-rollout memory server keeping its graph in the rollout's folder, its processes marked. */
function memoryServer(mark: string, options: Parameters<typeof mcpServer>[1] = {}) {
  return mcpServer(
    ({ tempDir }) => ({
      command: node,
      args: [referenceServer('memory')],
      env: { MEMORY_FILE_PATH: path.join(tempDir, 'memory.jsonl'), [MARK_VARIABLE]: mark },
    }),
    { name: 'memory', ...options },
  );
}

/** The entity names of a `read_graph` answer. */
function entityNames(text: string): string[] {
  return (JSON.parse(text) as { entities: { name: string }[] }).entities.map((entity) => entity.name).sort();
}

/**
 * Opens a rollout for each of `infos` at once; each creates its entity (`entity-<index>`), then,
 * all written, each reads the graph. Answers the entity names each rollout saw, and the tools.
 * `server-memory` rewrites its whole file on each write, so writes to one (shared) server must
 * not overlap: `sequentialWrites` makes them one after the other.
 */
async function writersThenReaders(
  run: StartedToolSource,
  infos: readonly ToolRolloutInfo[],
  sequentialWrites = false,
): Promise<{ graphs: string[][]; opened: RolloutTools[] }> {
  const opened = await Promise.all(infos.map((info) => run.open(info)));
  const write = async (tools: RolloutTools, index: number): Promise<void> => {
    const name = `entity-${index}`;
    const created = await tools.call('create_entities', {
      entities: [{ name, entityType: 'note', observations: [`written by ${name}`] }],
    });
    expect(created.isError, created.content).toBe(false);
  };
  if (sequentialWrites) for (const [index, tools] of opened.entries()) await write(tools, index);
  else await Promise.all(opened.map(write));
  const graphs = await Promise.all(
    opened.map(async (tools) => {
      const graph = await tools.call('read_graph', {});
      expect(graph.isError, graph.content).toBe(false);
      return entityNames(graph.content);
    }),
  );
  return { graphs, opened };
}

describe('mcpServer over stdio (server-memory)', () => {
  it('lists the server tools under their own names as OpenAI function tools', async () => {
    const run = await started(memoryServer(newMark()));
    const names = run.definitions.map((definition) => definition.function.name);
    expect(names).toEqual(expect.arrayContaining(['create_entities', 'read_graph', 'search_nodes']));
    const create = run.definitions.find((definition) => definition.function.name === 'create_entities');
    expect(create?.type).toBe('function');
    expect(create?.function.parameters).toMatchObject({ type: 'object', properties: { entities: expect.anything() } });
    expect(run.name).toBe('memory');
  });

  it("gives each rollout its own server: concurrent rollouts each see only their own entity, in their own folder's file", async () => {
    const mark = newMark();
    const run = await started(memoryServer(mark));
    const infos = await Promise.all([rollout('a'), rollout('b'), rollout('c')]);
    const { graphs, opened } = await writersThenReaders(run, infos);
    // Three rollouts, three server processes.
    expect(markedProcesses(mark)).toHaveLength(3);
    expect(graphs).toEqual([['entity-0'], ['entity-1'], ['entity-2']]);
    for (const [index, info] of infos.entries()) {
      expect(await readFile(path.join(info.tempDir, 'memory.jsonl'), 'utf8')).toContain(`entity-${index}`);
    }
    await Promise.all(opened.map((tools) => tools.close()));
    expect(markedProcesses(mark)).toEqual([]);
  });

  it("with scope 'shared', one server for the run: concurrent rollouts see each other's entities", async () => {
    const mark = newMark();
    const run = await started(memoryServer(mark, { scope: 'shared' }));
    const infos = await Promise.all([rollout(0), rollout(1), rollout(2)]);
    const { graphs, opened } = await writersThenReaders(run, infos, true);
    await Promise.all(opened.map((tools) => tools.close()));
    for (const graph of graphs) expect(graph).toEqual(['entity-0', 'entity-1', 'entity-2']);
    // One process for the run, kept across rollouts, gone when the run closes.
    expect(markedProcesses(mark)).toHaveLength(1);
    await run.close();
    expect(markedProcesses(mark)).toEqual([]);
  });

  it('answers an unknown tool, bad arguments and an oversized result as error tool messages; the server goes on', async () => {
    const run = await started(memoryServer(newMark(), { maxResultChars: 300 }));
    const tools = await run.open(await rollout('x'));
    cleanups.push(() => tools.close());
    const unknown = await tools.call('no_such_tool', {});
    expect(unknown).toEqual({ isError: true, content: expect.stringContaining('no_such_tool') });
    const bad = await tools.call('create_entities', { entities: 'not a list' });
    expect(bad.isError).toBe(true);
    expect(bad.content).toMatch(/^Error: /);
    const big = await tools.call('create_entities', {
      entities: [{ name: 'big', entityType: 'note', observations: ['x'.repeat(400)] }],
    });
    expect(big).toEqual({ isError: true, content: expect.stringMatching(/over the limit of 300/) });
    const graph = await tools.call('read_graph', {});
    expect(graph.isError).toBe(true); // the graph holds the big entity: also over the limit
    const search = await tools.call('search_nodes', { query: 'nothing-matches' });
    expect(search).toEqual({ isError: false, content: expect.stringContaining('"entities": []') });
  });

  it('offers a subset, renamed, with options.tools; a name the server lacks fails the start', async () => {
    const run = await started(memoryServer(newMark(), { tools: { create_entities: 'remember', read_graph: true } }));
    expect(run.definitions.map((definition) => definition.function.name)).toEqual(['remember', 'read_graph']);
    const tools = await run.open(await rollout('x'));
    cleanups.push(() => tools.close());
    const made = await tools.call('remember', { entities: [{ name: 'n', entityType: 't', observations: [] }] });
    expect(made.isError, made.content).toBe(false);
    expect((await tools.call('create_entities', {})).isError).toBe(true);
    expect(entityNames((await tools.call('read_graph', {})).content)).toEqual(['n']);

    const error = await memoryServer(newMark(), { tools: ['read_graph', 'teleport'] })
      .start()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpServerError);
    expect(error).toMatchObject({ server: 'memory', reason: 'tools', message: expect.stringContaining('`teleport`') });
  });
});

describe('mcpServer over stdio (server-filesystem)', () => {
  it("roots a per-rollout server in the rollout's own folder: writes land there, other folders are refused", async () => {
    const mark = newMark();
    const run = await started(
      mcpServer(
        ({ tempDir }) => ({
          command: node,
          args: [referenceServer('filesystem'), tempDir],
          env: { [MARK_VARIABLE]: mark },
        }),
        { name: 'files' },
      ),
    );
    expect(run.definitions.map((definition) => definition.function.name)).toEqual(
      expect.arrayContaining(['read_text_file', 'write_file', 'list_directory']),
    );
    const [first, second] = [await rollout(1), await rollout(2)];
    const [a, b] = await Promise.all([run.open(first), run.open(second)]);
    const written = await a.call('write_file', { path: path.join(first.tempDir, 'note.txt'), content: 'hello' });
    expect(written.isError, written.content).toBe(false);
    expect(await readFile(path.join(first.tempDir, 'note.txt'), 'utf8')).toBe('hello');
    // The second rollout's server cannot reach the first rollout's folder.
    const outside = await b.call('read_text_file', { path: path.join(first.tempDir, 'note.txt') });
    expect(outside.isError).toBe(true);
    expect(outside.content).toMatch(/denied|outside|not allowed/i);
    const listing = await b.call('list_directory', { path: second.tempDir });
    expect(listing).toEqual({ isError: false, content: '' });
    await writeFile(path.join(second.tempDir, 'seen.txt'), 'x');
    expect((await b.call('list_directory', { path: second.tempDir })).content).toContain('seen.txt');
    await Promise.all([a.close(), b.close()]);
    expect(markedProcesses(mark)).toEqual([]);
    expect(await readdir(first.tempDir)).toEqual(['note.txt']);
  });
});

describe('mcpServer over streamable HTTP (server-everything)', () => {
  let everything: HttpEverything;
  beforeAll(async () => {
    everything = await startHttpEverything();
  });
  afterAll(async () => {
    await everything.close();
  });

  it('lists the tools, answers a call, and cuts a long-running tool at the timeout with an error; the rollout goes on', async () => {
    const run = await started(mcpServer({ url: everything.url }, { timeout: 1_000 }));
    expect(run.name).toBe(everything.url);
    const names = run.definitions.map((definition) => definition.function.name);
    expect(names).toEqual(expect.arrayContaining(['echo', 'get-sum', 'trigger-long-running-operation']));
    const tools = await run.open(await rollout('x'));
    cleanups.push(() => tools.close());
    expect(await tools.call('echo', { message: 'hi' })).toEqual({ isError: false, content: 'Echo: hi' });
    expect(await tools.call('get-sum', { a: 2, b: 3 })).toEqual({
      isError: false,
      content: 'The sum of 2 and 3 is 5.',
    });
    const slow = await tools.call('trigger-long-running-operation', { duration: 30, steps: 30 });
    expect(slow).toEqual({
      isError: true,
      content: expect.stringMatching(/timed out after 1000 ms and was cancelled/),
    });
    expect(await tools.call('echo', { message: 'still here' })).toEqual({
      isError: false,
      content: 'Echo: still here',
    });
  });

  it('joins text blocks and describes the rest; structured content alone comes as JSON', async () => {
    const run = await started(mcpServer({ url: everything.url }));
    const tools = await run.open(await rollout('x'));
    cleanups.push(() => tools.close());
    const image = await tools.call('get-tiny-image', {});
    expect(image.isError).toBe(false);
    expect(image.content.split('\n')).toContain('[image (image/png)]');
    const weather = await tools.call('get-structured-content', { location: 'New York' });
    expect(weather.isError).toBe(false);
    expect(JSON.parse(weather.content)).toMatchObject({ temperature: expect.any(Number) });
  });

  it("opens a fresh MCP session per rollout, and with scope 'shared' one for the run", async () => {
    const perRollout = await started(mcpServer({ url: everything.url }, { tools: ['echo'] }));
    const shared = await started(mcpServer({ url: everything.url }, { tools: ['echo'], scope: 'shared' }));
    for (const run of [perRollout, shared]) {
      const [a, b] = await Promise.all([run.open(await rollout(1)), run.open(await rollout(2))]);
      expect((await a.call('echo', { message: 'a' })).content).toBe('Echo: a');
      expect((await b.call('echo', { message: 'b' })).content).toBe('Echo: b');
      await Promise.all([a.close(), b.close()]);
    }
    // The closed per-rollout sessions are closed: their tools answer so instead of calling out.
    const closed = await perRollout.open(await rollout(3));
    await closed.close();
    expect(await closed.call('echo', { message: 'late' })).toEqual({
      isError: true,
      content: expect.stringContaining('is closed'),
    });
  });
});

describe('mcpServer fails fast at the start, naming the server', () => {
  it('refuses a command that does not exist', async () => {
    const error = await mcpServer({ command: 'policyloop-no-such-mcp-server', args: ['--stdio'] })
      .start()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpServerError);
    expect(error).toMatchObject({
      server: 'policyloop-no-such-mcp-server --stdio',
      reason: 'spawn',
      message: expect.stringMatching(/`policyloop-no-such-mcp-server` was not found/),
    });
  });

  it('refuses a server that exits during initialize, with its stderr', async () => {
    const error = await mcpServer(
      { command: node, args: ['-e', 'console.error("no config file"); process.exit(3)'] },
      { name: 'broken' },
    )
      .start()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpServerError);
    expect(error).toMatchObject({ server: 'broken', reason: 'exited', stderr: 'no config file' });
    expect((error as Error).message).toMatch(/exited with code 3 during `initialize`/);
  });

  it('refuses a server that never answers initialize, after startTimeout', async () => {
    const mark = newMark();
    const error = await mcpServer(
      { command: node, args: ['-e', 'setInterval(() => {}, 1000)'], env: { [MARK_VARIABLE]: mark } },
      { name: 'silent', startTimeout: 500 },
    )
      .start()
      .catch((caught: unknown) => caught);
    expect(error).toMatchObject({ server: 'silent', reason: 'timeout' });
    expect(markedProcesses(mark)).toEqual([]);
  });

  it('refuses an unreachable URL', async () => {
    const url = `http://127.0.0.1:${await freePort()}/mcp`;
    const error = await mcpServer({ url }, { name: 'remote tools' })
      .start()
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(McpServerError);
    expect(error).toMatchObject({ server: 'remote tools', reason: 'unreachable' });
    expect((error as Error).message).toContain(url);
    expect((error as Error).message).toMatch(/ECONNREFUSED/);
  });

  it('refuses a config function that throws, or returns no config', async () => {
    const threw = await mcpServer(
      () => {
        throw new Error('no key');
      },
      { name: 'keyed' },
    )
      .start()
      .catch((caught: unknown) => caught);
    expect(threw).toMatchObject({ server: 'keyed', reason: 'config', message: expect.stringContaining('no key') });
    const bad = await mcpServer(() => ({ commnd: 'x' }) as never, { name: 'typo' })
      .start()
      .catch((caught: unknown) => caught);
    expect(bad).toMatchObject({ server: 'typo', reason: 'config' });
  });

  it('refuses bad configs and options when made, before anything starts', () => {
    expect(() => mcpServer({ command: '' })).toThrow(InvalidArgumentError);
    expect(() => mcpServer({ url: 'ftp://example.com/mcp' })).toThrow(/http\(s\) URL/);
    expect(() => mcpServer({ command: 'x' }, { scope: 'global' as never })).toThrow(/scope/);
    expect(() => mcpServer({ command: 'x' }, { timeout: 0 })).toThrow(/timeout/);
    expect(() => mcpServer({ command: 'x' }, { maxResults: 3 } as never)).toThrow(/Unknown option/);
  });
});

describe('mcpServer leaves no process behind', () => {
  it('a per-rollout server started through a shell is killed with its whole process group', async () => {
    const mark = newMark();
    // `sh -c '...; true'` forks node instead of exec-ing it: the server is the shell's child.
    const run = await started(
      mcpServer(
        {
          command: 'sh',
          args: ['-c', `"${node}" "${referenceServer('memory')}"; true`],
          env: { [MARK_VARIABLE]: mark, MEMORY_FILE_PATH: path.join(tmpdir(), `mcp-shell-${mark}.jsonl`) },
        },
        { name: 'wrapped' },
      ),
    );
    expect(markedProcesses(mark)).toEqual([]); // the start's probe is gone
    const tools = await run.open(await rollout('x'));
    expect(markedProcesses(mark)).toHaveLength(2); // sh and node
    expect((await tools.call('read_graph', {})).isError).toBe(false);
    await tools.close();
    expect(markedProcesses(mark)).toEqual([]);
    await rm(path.join(tmpdir(), `mcp-shell-${mark}.jsonl`), { force: true });
  });

  it("an aborted rollout's server stops at once, before its tools are closed; a call then rejects", async () => {
    const mark = newMark();
    const run = await started(memoryServer(mark));
    const controller = new AbortController();
    const tools = await run.open(await rollout('x', controller.signal));
    expect(markedProcesses(mark)).toHaveLength(1);
    const pending = tools.call('read_graph', {}, { signal: controller.signal });
    controller.abort(new Error('run stopped'));
    await expect(pending).rejects.toThrow('run stopped');
    expect(await eventually(() => markedProcesses(mark).length === 0)).toBe(true);
    await tools.close();
  });

  it("the run's close stops the servers of rollouts whose tools were never closed", async () => {
    const mark = newMark();
    const run = await memoryServer(mark).start();
    await run.open(await rollout(1));
    await run.open(await rollout(2));
    expect(markedProcesses(mark)).toHaveLength(2);
    await run.close();
    expect(markedProcesses(mark)).toEqual([]);
  });
});

describe('an interrupted script leaves no server process behind', () => {
  /** Runs the interrupted script until `ready`, then sends it `signal`; resolves how it ended. */
  async function interrupt(signal: NodeJS.Signals, env: Record<string, string> = {}) {
    const mark = newMark();
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(import.meta.dirname, 'support', 'interrupted-script.ts')],
      {
        env: { ...process.env, [MARK_VARIABLE]: mark, ROLLOUTS: '2', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    cleanups.push(async () => {
      child.kill('SIGKILL');
      for (const pid of markedProcesses(mark)) process.kill(pid, 'SIGKILL');
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, exitSignal) => resolve({ code, signal: exitSignal })),
    );
    expect(await eventually(() => output.includes('ready'), 60_000), output).toBe(true);
    // The script carries the mark too, and so may a helper of its own (tsx's esbuild service):
    // count only processes outside the script's process group, that is, the servers' groups.
    const servers = (): number[] =>
      markedProcesses(mark).filter((pid) => processGroup(pid) !== processGroup(child.pid ?? -1));
    const before = servers().length;
    child.kill(signal);
    const end = await ended;
    const gone = await eventually(() => markedProcesses(mark).length === 0, 5_000);
    return { before, end, gone, output };
  }

  it('on SIGINT: the servers are killed and the script ends as Node would (by the signal)', async () => {
    const { before, end, gone } = await interrupt('SIGINT');
    expect(before).toBe(4); // two servers, each with its helper
    expect(end).toEqual({ code: null, signal: 'SIGINT' });
    expect(gone).toBe(true);
  });

  it('on SIGTERM: the same', async () => {
    const { before, end, gone } = await interrupt('SIGTERM');
    expect(before).toBe(4);
    expect(end).toEqual({ code: null, signal: 'SIGTERM' });
    expect(gone).toBe(true);
  });

  it("a script's own SIGINT handler still runs (the default is not forced): the servers are gone all the same", async () => {
    const { before, end, gone, output } = await interrupt('SIGINT', { HANDLE_SIGNAL: 'SIGINT' });
    expect(before).toBe(4);
    expect(output).toContain('handled');
    expect(end).toEqual({ code: 0, signal: null });
    expect(gone).toBe(true);
  });
});
