/**
 * A tool-using environment: arithmetic questions the agent may answer with a calculator. The
 * default agent loop offers the function tools `add` and `multiply`, runs the calls the model
 * makes (a bad call comes back to it as an error tool message) and stops when a turn calls no
 * tool, after at most 4 turns. Its rubric: `correct` (the exact number), `numeric` (the fraction
 * of the reply's characters that are digits: a small shaping term, weight 0.1) and `used_tool`
 * (a metric, weight 0). The tiny models have never seen a tool call, so they score low here until
 * trained; the environment is the same for any model (`policyloop eval ... --base-url ...`).
 * Train on it: npx tsx examples/environments/train.ts examples/environments/calculator.ts policyloop/agent-chat
 */
import { defineEnvironment, exactMatch, finalAssistantText, functionTool } from 'policyloop';
import { z } from 'zod';

/** Two numbers, as both tools take them. */
const operands = z.object({ a: z.number(), b: z.number() });

const questions: [number, '+' | '*', number][] = [
  [17, '+', 25],
  [6, '*', 7],
  [120, '+', 45],
  [12, '*', 11],
  [305, '+', 99],
  [9, '*', 13],
];
const held: [number, '+' | '*', number][] = [
  [48, '+', 52],
  [15, '*', 4],
];
const asTask = ([a, op, b]: [number, '+' | '*', number]) => ({
  prompt: `${a} ${op} ${b} = ?`,
  answer: String(op === '+' ? a + b : a * b),
});

export default defineEnvironment({
  name: 'calculator',
  dataset: questions.map(asTask),
  evalDataset: held.map(asTask),
  // Short: the tiny models read few tokens, tools included.
  systemPrompt: 'Use the tools. Reply with the number.',
  maxTurns: 4,
  // A call or a number is short: a limit keeps an untrained model's rambling cheap.
  sampling: { max_tokens: 48 },
  tools: [
    functionTool({ name: 'add', parameters: operands, execute: ({ a, b }) => a + b }),
    functionTool({ name: 'multiply', parameters: operands, execute: ({ a, b }) => a * b }),
  ],
  reward: {
    correct: exactMatch((task) => task.answer),
    numeric: {
      fn: (trajectory) => {
        const text = finalAssistantText(trajectory);
        return text.length === 0 ? 0 : (text.match(/\d/g)?.length ?? 0) / text.length;
      },
      weight: 0.1,
    },
    used_tool: { fn: (trajectory) => (Number(trajectory.metrics['tool_calls'] ?? 0) > 0 ? 1 : 0), weight: 0 },
  },
});
