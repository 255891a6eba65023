/** SFT data: trajectories as `{messages, tools?}` JSONL rows, and writing them to a file. */
import { copyFile, link, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InvalidArgumentError } from '../internal/errors.js';
import { isChoice, SFTRow, Trajectory } from '../schema/index.js';
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionMessageParam,
  MessageOrChoice,
  TrajectoryInput,
} from '../schema/index.js';

/**
 * One SFT row per conversation of a trajectory: the main conversation first, then each sub-agent
 * history (`additional_histories`, e.g. the specialist after a handoff), each with its own
 * messages (its own system prompt) and its own tools. Conversations with no assistant turn give
 * no row.
 * @example
 * trajectoryToSFTRows(handoffRun).length; // 2: the triage agent's and the specialist's
 */
export function trajectoryToSFTRows(trajectory: TrajectoryInput): SFTRow[] {
  const parsed = Trajectory.parse(trajectory);
  const rows: SFTRow[] = [];
  for (const conversation of [parsed, ...parsed.additional_histories]) {
    const row = conversationRow(conversation.messages_and_choices, conversation.tools);
    if (row !== null) rows.push(row);
  }
  return rows;
}

/** The SFT row of one conversation, or null when it has no assistant turn. */
function conversationRow(items: readonly MessageOrChoice[], tools: SFTRow['tools'] | null | undefined): SFTRow | null {
  const messages: ChatCompletionMessageParam[] = [];
  for (const item of items) {
    if (!isChoice(item)) {
      messages.push(item);
      continue;
    }
    const { content, tool_calls, function_call, refusal } = item.message;
    const message: ChatCompletionAssistantMessageParam = { role: 'assistant', content: content ?? null };
    if (tool_calls !== undefined && tool_calls !== null && tool_calls.length > 0) message.tool_calls = tool_calls;
    if (function_call !== undefined && function_call !== null) message.function_call = function_call;
    if (refusal !== undefined && refusal !== null) message.refusal = refusal;
    messages.push(message);
  }
  let end = messages.length;
  while (end > 0 && messages[end - 1]?.role !== 'assistant') end -= 1;
  if (end === 0) return null;
  const row: SFTRow = { messages: messages.slice(0, end) };
  if (tools !== undefined && tools !== null && tools.length > 0) row.tools = tools;
  return row;
}

/**
 * Rows for an SFT job from trajectories or ready rows (`{messages}` objects pass as they are,
 * validated). A trajectory gives a row per conversation (see {@link trajectoryToSFTRows}): a
 * handoff run's specialist is learned with its own system prompt and tools. Throws when nothing
 * is left to learn.
 */
export function toSFTRows(items: readonly (TrajectoryInput | SFTRow)[]): SFTRow[] {
  const rows: SFTRow[] = [];
  for (const [index, item] of items.entries()) {
    if ('messages' in item && Array.isArray(item.messages)) {
      const parsed = SFTRow.safeParse(item);
      if (!parsed.success) {
        const issue = parsed.error.issues[0]?.message ?? 'invalid';
        throw new InvalidArgumentError('source', `Expected SFT row ${index} to be {messages, tools?}: ${issue}`, {
          cause: parsed.error,
        });
      }
      rows.push(parsed.data);
      continue;
    }
    rows.push(...trajectoryToSFTRows(item as TrajectoryInput));
  }
  if (rows.length === 0) {
    throw new InvalidArgumentError(
      'source',
      `Expected SFT data with at least one assistant turn to learn, got ${items.length} item(s) with none.`,
    );
  }
  return rows;
}

/** Writes rows as JSONL to a new file in `directory` and returns its path. */
export async function writeSFTFile(directory: string, rows: readonly SFTRow[]): Promise<string> {
  await mkdir(directory, { recursive: true });
  const file = path.join(directory, `sft-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}.jsonl`);
  await writeFile(file, rows.map((row) => `${JSON.stringify(row)}\n`).join(''), 'utf8');
  return file;
}

/**
 * Puts the JSONL file `file` into `directory` (the model's `sft-data` folder, which the local
 * service always reads) and returns its path there: a hard link when the file system allows it
 * (no copy), a copy otherwise. A file already in `directory` is returned as it is.
 */
export async function stageSFTFile(directory: string, file: string): Promise<string> {
  const source = path.resolve(file);
  const rest = path.relative(path.resolve(directory), source);
  if (rest !== '' && !rest.startsWith('..') && !path.isAbsolute(rest)) return source;
  await mkdir(directory, { recursive: true });
  const extension = path.extname(source);
  const target = path.join(
    directory,
    `${path.basename(source, extension)}-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}${extension || '.jsonl'}`,
  );
  try {
    await link(source, target);
  } catch {
    await copyFile(source, target);
  }
  return target;
}
