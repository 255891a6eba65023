/**
 * Writes `test/fixtures/exported-adapters/<model>/adapter/`: an adapter the engine trained (one
 * SFT job on a reference fixture model) and exported with `exportCheckpoint`. Then
 * `scripts/reference/peft_exported_logits.py` loads each with PEFT and records the PeftModel's
 * logits next to it, so `test/engine/hf-exported-adapter.test.ts` shows that PEFT reading our
 * adapter computes what the engine computes. Deterministic: the same inputs write the same files.
 *
 *   npx tsx scripts/write-exported-adapters.ts
 *   scripts/reference/.venv/bin/python scripts/reference/peft_exported_logits.py
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createEngine, exportCheckpoint } from '../src/engine/index.js';

const MODELS = ['qwen3-tied', 'llama-untied'] as const;
const FIXTURES = path.resolve('test/fixtures/reference');
const OUT = path.resolve('test/fixtures/exported-adapters');

const rows = [
  ['What is two plus two?', 'Four.'],
  ['Name a colour.', 'Blue.'],
  ['Say hello.', 'Hello!'],
  ['Count to three.', 'One, two, three.'],
].map(([question, answer]) => ({
  messages: [
    { role: 'user' as const, content: question as string },
    { role: 'assistant' as const, content: answer as string },
  ],
}));

const scratch = await mkdtemp(path.join(os.tmpdir(), 'exported-adapters-'));
const folders = MODELS.map((name) => path.join(FIXTURES, name));
const engine = await createEngine({ workers: false, models: folders, env: {} });
try {
  for (const [index, name] of MODELS.entries()) {
    const folder = folders[index] as string;
    const checkpoint = path.join(scratch, name);
    await engine.train(
      {
        kind: 'sft',
        policy: { baseModel: folder, checkpointPath: null, key: folder },
        outputPath: checkpoint,
        step: 1,
        rows,
        config: { batch_size: 4, learning_rate: 5e-2, assistant_turns: 'all', lora_rank: 4, lora_alpha: 16 },
      },
      { onEvent: () => undefined },
    );
    await exportCheckpoint({
      baseDirectory: folder,
      baseModel: name,
      checkpointDirectory: checkpoint,
      out: path.join(OUT, name, 'adapter'),
      merged: false,
    });
    process.stdout.write(`wrote ${path.join(OUT, name, 'adapter')}\n`);
  }
} finally {
  await engine.close();
  await rm(scratch, { recursive: true, force: true });
}
