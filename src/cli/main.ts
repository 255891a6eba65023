#!/usr/bin/env node
/**
 * The `policyloop` command: dispatches to a subcommand module under `./commands/`. Each command
 * is loaded only when used, so `policyloop --help` does not load the service or the engine.
 * @module
 */
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Command } from './command.js';

/** Subcommands by name; add a line here (and a module under `commands/`) for a new one. */
const COMMANDS: Readonly<Record<string, { readonly summary: string; readonly load: () => Promise<Command> }>> = {
  serve: {
    summary: 'Run the local training service on loopback',
    load: async () => (await import('./commands/serve.js')).serveCommand,
  },
};

/** Usage text of the top-level command. */
export function usage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length));
  const lines = Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(width)}  ${command.summary}`);
  return [
    'Usage: policyloop <command> [options]',
    '',
    'Commands:',
    ...lines,
    '',
    'Run `policyloop <command> --help` for its options.',
  ].join('\n');
}

/**
 * Runs the CLI with `argv` (without the node and script paths) and resolves to the exit code.
 * @example
 * process.exitCode = await main(['serve', '--port', '0']);
 */
export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${usage()}\n`);
    return name === undefined ? 1 : 0;
  }
  if (name === '--version' || name === '-v') {
    const { createRequire } = await import('node:module');
    const manifest = createRequire(import.meta.url)('../../package.json') as { version: string };
    process.stdout.write(`${manifest.version}\n`);
    return 0;
  }
  const entry = COMMANDS[name];
  if (entry === undefined) {
    process.stderr.write(`policyloop: unknown command ${JSON.stringify(name)}\n\n${usage()}\n`);
    return 2;
  }
  const command = await entry.load();
  return await command.run(rest);
}

/** True when this file is the process's entry script (also through npm's `bin` symlink). */
function isEntryScript(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

// Run only when executed as a script (not when imported by tests).
if (isEntryScript()) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      process.stderr.write(`policyloop: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
