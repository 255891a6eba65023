/**
 * The local engine against torch + transformers + PEFT on the same cores (issue 37: a LoRA RL step
 * and batched sampling within 1.5x of torch's). Same model shape, same batch, same random-weight
 * model (each side initialises its own; the values do not change the work), float32 on the CPU:
 *
 * - the RL training step: 32 sequences of a 64-token prompt and 64 learned tokens, LoRA rank 8 on
 *   all seven linear modules; forward, the learned tokens' logprobs, the policy-gradient loss,
 *   backward, and the AdamW update (gradients clipped to norm 1). The engine's side is its real
 *   training path: `trainableAdapter` + `computeStep` (RL loss) + `AdamW.step`, in a worker thread
 *   with its own copy of the base model, as the engine trains; torch's side is
 *   `scripts/reference/engine_step.py` (PEFT `get_peft_model`, `logits_to_keep`, `torch.optim.AdamW`,
 *   `torch.set_num_threads(<cpus>)`);
 * - batched sampling: 32 prompts of 64 tokens, 64 new tokens each (KV cache, temperature 1, no
 *   early stop), through the adapter: the engine's `generateHf` in the main thread against
 *   `generate` on the PeftModel.
 *
 * Both sides run in one process tree (torch in a child process that builds its model once and
 * waits for commands), one after the other, after `--warmup` unmeasured runs of each; each round
 * runs the four measures and alternates which side goes first, so a change of load hits both.
 * Prints every round, the median ratio engine / torch (target <= 1.5) for training and sampling,
 * tokens/s of each side (training: every token of the step, `32 x 128`; sampling: new tokens),
 * the machine, its load average, which engine runtime ran, and the peak RSS of both processes.
 *
 *   npx tsx bench/engine-vs-torch.ts [--shape smollm2-135m|qwen3-0.6b] [--rounds 3] [--warmup 1] [--runtime onnxruntime|tfjs-wasm]
 *
 * `--train-rows N` trains on N rows instead of 32 (a Qwen3-0.6B step of 32 rows takes the engine
 * over half an hour on 2 cores; its tokens/s hardly depend on the rows, since it trains in passes of
 * at most 340 tokens, and neither do torch's in micro-batches of 8).
 * `--torch-micro-batch N` makes torch's step accumulate the gradient over N rows at a time (default
 * 8: all 32 rows of the SmolLM2 shape at once peak at 12.3 GB in torch, and the OOM killer took that
 * process on a shared 24 GB machine; 8 rows took about the same time at 4.5 GB).
 * `--runtime` reaches the engine as POLICYLOOP_ENGINE_RUNTIME (default: that variable, else the
 * engine's own choice). `--layers N` keeps the shape with N layers on both sides (quick checks, not
 * figures). Needs the reference venv (scripts/reference/README.md); without it the bench prints the
 * commands that build it and exits with code 2. BENCH_MODEL_DIR=<dir> writes the engine's random
 * model folder there and reuses it on later runs.
 */
import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { WeightPlacement } from '../src/engine/hf/files.js';
import type { TextLayer } from '../src/text/loader.js';
import { SHAPES, countParameters, idsOnlyTextLayer, shapeNamed, writeRandomModel } from './support/random-model.js';

const ROWS = 32;
const PROMPT = 64;
const NEW_TOKENS = 64;
/** The engine's default RL learning rate (`DEFAULT_LEARNING_RATE`); torch's side uses the same. */
const LEARNING_RATE = 5e-3;
const RUNTIMES = ['onnxruntime', 'tfjs-wasm'] as const;
type Runtime = (typeof RUNTIMES)[number];

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const VENV_PYTHON = path.join(ROOT, 'scripts', 'reference', '.venv', 'bin', 'python');
const TORCH_SCRIPT = path.join(ROOT, 'scripts', 'reference', 'engine_step.py');

/** Token `index` of row `row`: the same ids as engine_step.py's `token_ids`. */
const tokenId = (row: number, index: number, vocabulary: number): number => (row * 131 + index * 7919) % vocabulary;

/** What the engine's training worker is given. */
interface WorkerSetup {
  readonly directory: string;
  readonly vocabulary: number;
  /** Rows of the training step. */
  readonly rows: number;
  /** The runtime the step runs on. */
  readonly runtime: Runtime;
}

/** What the training worker posts: once `ready`, then one `step` per step asked for. */
type WorkerMessage =
  | {
      readonly type: 'ready';
      readonly placement: WeightPlacement;
      readonly loadSeconds: number;
      readonly passTokens: number;
    }
  | { readonly type: 'step'; readonly seconds: number; readonly loss: number; readonly gradNorm: number }
  | { readonly type: 'refused'; readonly message: string };

/**
 * The training worker: loads the base model as the engine's training worker does, builds a fresh
 * LoRA adapter (rank 8, all seven modules) and its AdamW, and on each `step` message runs one RL
 * step on the fixed batch: `computeStep` (the RL objective's defaults) and `AdamW.step`.
 */
async function trainingWorker(setup: WorkerSetup): Promise<void> {
  const port = parentPort;
  if (!port) return;
  const { loadTensorFlow } = await import('../src/engine/backend.js');
  const { loadBaseTensors, readHfConfig } = await import('../src/engine/hf/files.js');
  const { initialLora, loraSettingsOf } = await import('../src/engine/hf/lora.js');
  const { trainingPlacement } = await import('../src/engine/hf/runtime.js');
  const { trainableAdapter } = await import('../src/engine/hf/trainer.js');
  const { AdamW } = await import('../src/engine/optimizer.js');
  const { computeStep, lossSettings } = await import('../src/engine/trainer.js');
  const tf = await loadTensorFlow();
  const config = await readHfConfig(setup.directory);
  const placement = trainingPlacement(config);
  const started = performance.now();
  const base = await loadBaseTensors(tf, setup.directory, config, placement);
  const loadSeconds = (performance.now() - started) / 1000;
  const settings = loraSettingsOf(null);
  const weights = initialLora(config, settings);
  let trainable: ReturnType<typeof trainableAdapter>;
  try {
    // The text layer is not used by a training step of token ids.
    trainable = trainableAdapter(
      tf,
      { directory: setup.directory, config, base, text: null as never },
      settings,
      weights,
      { runtime: setup.runtime },
    );
  } catch (error) {
    port.postMessage({ type: 'refused', message: (error as Error).message } satisfies WorkerMessage);
    return;
  }
  const optimizer = new AdamW(weights, null);
  const length = PROMPT + NEW_TOKENS;
  const sequences = Array.from({ length: setup.rows }, (_, row) => {
    const tokens = Array.from({ length }, (_, index) => tokenId(row, index, setup.vocabulary));
    return {
      tokens,
      mask: tokens.map((_, index) => (index >= PROMPT ? 1 : 0)),
      // Advantages +1 / -1 by row, as torch's side; no sampled logprobs (on-policy).
      weights: tokens.map(() => (row % 2 === 0 ? 1 : -1)),
      oldLogprobs: tokens.map(() => Number.NaN),
    };
  });
  port.postMessage({
    type: 'ready',
    placement,
    loadSeconds,
    passTokens: trainable.tokensPerPass ?? 0,
  } satisfies WorkerMessage);
  port.on('message', async () => {
    const begin = performance.now();
    const step = await computeStep(tf, trainable, sequences, lossSettings('rl', null));
    const gradNorm = optimizer.step(step.gradients, LEARNING_RATE);
    const seconds = (performance.now() - begin) / 1000;
    port.postMessage({ type: 'step', seconds, loss: step.loss, gradNorm } satisfies WorkerMessage);
  });
}

/** The median of `numbers` (the mean of the middle two for an even count). */
function median(numbers: readonly number[]): number {
  const sorted = [...numbers].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

const loadAverage = (): string =>
  os
    .loadavg()
    .map((value) => value.toFixed(1))
    .join(' ');

/** One measure of one side. */
interface Timing {
  readonly seconds: number;
  readonly tokens: number;
  /** A training step's gradient norm before clipping (null: not finite), to see both sides computed one. */
  readonly gradNorm?: number | null;
}

/** A line-oriented conversation with engine_step.py --serve: one JSON line per command. */
class TorchSide {
  private readonly lines: AsyncIterator<string>;
  peakRssMb = 0;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  }

  static async start(args: readonly string[]): Promise<{ side: TorchSide; ready: Record<string, unknown> }> {
    const child = spawn(VENV_PYTHON, [TORCH_SCRIPT, '--serve', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.once('exit', (code, signal) => {
      // A signal too: the kernel's OOM killer ends it with SIGKILL when the machine runs short.
      if (code !== 0)
        console.error(`engine_step.py exited with ${code === null ? signal : `code ${code}`}:\n${stderr}`);
    });
    const side = new TorchSide(child);
    const ready = await side.next();
    return { side, ready };
  }

  private async next(): Promise<Record<string, unknown>> {
    const { value, done } = await this.lines.next();
    if (done) throw new Error('engine_step.py ended before answering (its stderr is printed above).');
    const record = JSON.parse(value) as Record<string, unknown>;
    this.peakRssMb = Math.max(this.peakRssMb, Number(record['peak_rss_mb'] ?? 0));
    return record;
  }

  async run(what: 'train' | 'sample'): Promise<Timing> {
    this.child.stdin.write(`${what}\n`);
    const record = await this.next();
    const gradNorm = record['grad_norm'];
    return {
      seconds: Number(record['seconds']),
      tokens: Number(record['tokens']),
      ...(gradNorm === undefined ? {} : { gradNorm: gradNorm === null ? null : Number(gradNorm) }),
    };
  }

  close(): void {
    this.child.stdin.end('quit\n');
  }
}

/**
 * The engine runtime that runs (`engineRuntime()` of src/engine/onnx/onnx-runtime.ts, which honours
 * POLICYLOOP_ENGINE_RUNTIME), described with its version and threads. Rejects when the requested
 * runtime cannot load.
 */
async function engineRuntime(requested: Runtime | undefined): Promise<{ name: Runtime; description: string }> {
  const { engineRuntime: resolve, describeEngineRuntime } = await import('../src/engine/onnx/onnx-runtime.js');
  const info = await resolve(requested);
  return { name: info.name, description: describeEngineRuntime(info) };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      shape: { type: 'string', default: 'smollm2-135m' },
      rounds: { type: 'string', default: '3' },
      warmup: { type: 'string', default: '1' },
      runtime: { type: 'string' },
      layers: { type: 'string' },
      'torch-micro-batch': { type: 'string' },
      'train-rows': { type: 'string', default: String(ROWS) },
    },
  });
  const shapeName = shapeNamed(values.shape);
  const rounds = Number(values.rounds);
  const warmup = Number(values.warmup);
  if (!(Number.isInteger(rounds) && rounds >= 1)) throw new Error(`Expected --rounds >= 1, got ${values.rounds}`);
  if (!(Number.isInteger(warmup) && warmup >= 0)) throw new Error(`Expected --warmup >= 0, got ${values.warmup}`);
  const requested = values.runtime ?? process.env['POLICYLOOP_ENGINE_RUNTIME'];
  if (requested !== undefined && !(RUNTIMES as readonly string[]).includes(requested))
    throw new Error(`Expected --runtime (or POLICYLOOP_ENGINE_RUNTIME) ${RUNTIMES.join(' or ')}, got ${requested}`);
  // Set before the engine loads, in this thread and (inherited) in the training worker.
  if (requested !== undefined) process.env['POLICYLOOP_ENGINE_RUNTIME'] = requested;
  const trainRows = Number(values['train-rows']);
  if (!(Number.isInteger(trainRows) && trainRows >= 1))
    throw new Error(`Expected --train-rows >= 1, got ${values['train-rows']}`);
  const layers = values.layers === undefined ? undefined : Number(values.layers);
  const shape = { ...SHAPES[shapeName], ...(layers === undefined ? {} : { layers }) };
  const qwen = shapeName === 'qwen3-0.6b';
  // The engine's modules are imported only after this, so that it reads the runtime asked for.
  const cpus = os.cpus();

  console.log(
    `# The engine against torch + PEFT: ${shapeName}${layers === undefined ? '' : ` with ${layers} layers`}, ` +
      `LoRA rank 8 on 7 modules; RL step on ${trainRows} x (${PROMPT} + ${NEW_TOKENS} learned) tokens; sampling ${ROWS} x ${NEW_TOKENS} new tokens`,
  );
  console.log(
    `machine: ${cpus.length}x ${cpus[0]?.model ?? 'cpu'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GB, node ${process.version}, load average ${loadAverage()}`,
  );
  if (!existsSync(VENV_PYTHON)) {
    console.log(
      'The reference venv (torch + transformers + PEFT) is missing. Build it once (a few GB, a few minutes):',
    );
    console.log('  python3.11 -m venv scripts/reference/.venv');
    console.log('  scripts/reference/.venv/bin/pip install -r scripts/reference/requirements.txt');
    process.exit(2);
  }
  let runtimeInfo: { name: Runtime; description: string };
  try {
    runtimeInfo = await engineRuntime(requested as Runtime | undefined);
  } catch (error) {
    console.log((error as Error).message);
    process.exit(1);
  }
  const runtime = runtimeInfo.description;
  console.log(`engine runtime: ${runtime}${requested === undefined ? ' (the engine’s default)' : ''}`);

  const kept = process.env['BENCH_MODEL_DIR'];
  const directory = kept ?? (await mkdtemp(path.join(os.tmpdir(), 'engine-vs-torch-')));
  const cleanups: (() => unknown)[] = [];
  try {
    await mkdir(directory, { recursive: true });
    const parameters = existsSync(path.join(directory, 'model.safetensors'))
      ? await countParameters(directory)
      : await writeRandomModel(directory, shape, qwen);

    // torch first: its child process builds the model while nothing else runs.
    // torch holds every activation of its micro-batch (12.3 GB for 32 rows of the SmolLM2 shape).
    const microBatch = values['torch-micro-batch'] ?? String(Math.min(trainRows, 8));
    const torchArgs = ['--shape', shapeName, '--threads', String(cpus.length)];
    torchArgs.push('--train-batch', String(trainRows), '--micro-batch', microBatch);
    if (layers !== undefined) torchArgs.push('--layers', String(layers));
    const { side: torch, ready } = await TorchSide.start(torchArgs);
    cleanups.push(() => torch.close());
    console.log(
      `torch ${String(ready['torch'])}, transformers ${String(ready['transformers'])}, peft ${String(ready['peft'])}, ` +
        `${String(ready['threads'])} threads, training in micro-batches of ${String(ready['micro_batch'])} rows; model built in ${Number(ready['build_seconds']).toFixed(1)} s ` +
        `(${(Number(ready['parameters']) / 1e6).toFixed(1)}M parameters, ${Number(ready['lora_parameters']).toLocaleString('en')} LoRA)`,
    );

    // The engine's sampling side, in this thread: the base model and a fresh adapter, unmerged.
    const { loadTensorFlow } = await import('../src/engine/backend.js');
    const { loadBaseTensors, readHfConfig } = await import('../src/engine/hf/files.js');
    const { initialLora, loraSettingsOf, uploadLora } = await import('../src/engine/hf/lora.js');
    const { runnable } = await import('../src/engine/hf/model.js');
    const { generateHf } = await import('../src/engine/hf/sampler.js');
    const { SeededRandom } = await import('../src/engine/random.js');
    const { typeScriptWorker } = await import('../src/engine/training-thread.js');
    const { OnnxHfModel, generateHfOnnx, onnxLora } = await import('../src/engine/onnx/onnx-sampler.js');
    const tf = await loadTensorFlow();
    const config = await readHfConfig(directory);
    let started = performance.now();
    const onOnnx = runtimeInfo.name === 'onnxruntime';
    // As the engine loads a base for sampling on each runtime: in host memory as float32 for onnxruntime.
    const base = await loadBaseTensors(tf, directory, config, onOnnx ? 'host' : 'heap', { float32: onOnnx });
    const settings = loraSettingsOf(null);
    const adapter = initialLora(config, settings);
    const model = onOnnx ? null : runnable(config, base, uploadLora(tf, config, settings, adapter));
    const onnx = onOnnx ? await OnnxHfModel.create(config, base) : null;
    const onnxAdapter = onOnnx ? await onnxLora(config, settings, adapter) : null;
    console.log(
      `engine: ${(parameters / 1e6).toFixed(1)}M parameters loaded in ${((performance.now() - started) / 1000).toFixed(1)} s for sampling`,
    );
    const text = idsOnlyTextLayer(shape.vocab);
    let samplingSeed = 0;
    const engineSample = async (): Promise<Timing> => {
      const rows = Array.from({ length: ROWS }, (_, row) => {
        samplingSeed += 1;
        return {
          prompt: Array.from({ length: PROMPT }, (_, index) => tokenId(row, index, shape.vocab)),
          sampling: {
            temperature: 1,
            topP: 1,
            maxTokens: NEW_TOKENS,
            stop: [],
            topLogprobs: 0,
            random: new SeededRandom(samplingSeed),
          },
        };
      });
      const begin = performance.now();
      const result = onnx
        ? await generateHfOnnx(onnx, onnxAdapter, text, rows)
        : await generateHf(tf, model as NonNullable<typeof model>, text, rows);
      const seconds = (performance.now() - begin) / 1000;
      const tokens = result.reduce((sum, sequence) => sum + sequence.sampledCount, 0);
      if (tokens !== ROWS * NEW_TOKENS)
        throw new Error(`The engine sampled ${tokens} tokens, not ${ROWS * NEW_TOKENS}.`);
      return { seconds, tokens };
    };

    // The engine's training side: a worker thread with its own copy of the base model.
    started = performance.now();
    const worker = typeScriptWorker(new URL(import.meta.url), {
      workerData: {
        directory,
        vocabulary: shape.vocab,
        rows: trainRows,
        runtime: runtimeInfo.name,
      } satisfies WorkerSetup,
    });
    cleanups.push(() => worker.terminate());
    const workerMessages: ((message: WorkerMessage) => void)[] = [];
    let workerFailure: Error | null = null;
    const failWaiting = (error: Error): void => {
      workerFailure = error;
      for (const waiting of workerMessages.splice(0)) waiting({ type: 'refused', message: error.message });
    };
    worker.on('message', (message: WorkerMessage) => workerMessages.shift()?.(message));
    worker.on('error', failWaiting);
    worker.on('exit', (code) => failWaiting(new Error(`The training worker exited with code ${code}.`)));
    const nextMessage = (): Promise<WorkerMessage> =>
      workerFailure
        ? Promise.resolve({ type: 'refused', message: workerFailure.message })
        : new Promise((resolve) => workerMessages.push(resolve));
    const workerReady = await nextMessage();
    if (workerReady.type !== 'ready') {
      console.log(
        `the engine refuses to train this model: ${workerReady.type === 'refused' ? workerReady.message : ''}`,
      );
      process.exitCode = 1;
      return;
    }
    console.log(
      `engine training worker: weights in ${workerReady.placement === 'host' ? 'host memory' : 'its wasm heap'}, ` +
        `loaded in ${workerReady.loadSeconds.toFixed(1)} s, passes of at most ${workerReady.passTokens} tokens`,
    );
    const engineTrain = async (): Promise<Timing> => {
      const answer = nextMessage();
      worker.postMessage('step');
      const message = await answer;
      if (message.type !== 'step') throw new Error(`The training worker failed: ${JSON.stringify(message)}`);
      const gradNorm = Number.isFinite(message.gradNorm) ? message.gradNorm : null;
      return { seconds: message.seconds, tokens: trainRows * (PROMPT + NEW_TOKENS), gradNorm };
    };

    const measures = {
      engineTrain,
      torchTrain: () => torch.run('train'),
      engineSample,
      torchSample: () => torch.run('sample'),
    };
    type Measure = keyof typeof measures;
    for (let run = 0; run < warmup; run += 1) {
      const begin = performance.now();
      const seconds: string[] = [];
      for (const [name, measure] of Object.entries(measures))
        seconds.push(`${name} ${(await measure()).seconds.toFixed(1)} s`);
      console.log(
        `warm-up ${run + 1} (not counted): ${seconds.join(', ')}; ${((performance.now() - begin) / 1000).toFixed(0)} s in all, load average ${loadAverage()}`,
      );
    }

    const peakRss = (): string =>
      `engine ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB / torch ${torch.peakRssMb.toFixed(0)} MB`;
    const gradientNorm = (timing: Timing): string =>
      timing.gradNorm === null || timing.gradNorm === undefined ? 'not finite' : timing.gradNorm.toFixed(3);
    const perSecond = (timing: Timing): string => `${(timing.tokens / timing.seconds).toFixed(1)} tokens/s`;
    const results: Record<Measure, Timing[]> = { engineTrain: [], torchTrain: [], engineSample: [], torchSample: [] };
    const ratios = { train: [] as number[], sample: [] as number[] };
    for (let round = 0; round < rounds; round += 1) {
      // Alternate which side goes first, so that a change of load does not always hit the same one.
      const order: Measure[] =
        round % 2 === 0
          ? ['engineTrain', 'torchTrain', 'engineSample', 'torchSample']
          : ['torchTrain', 'engineTrain', 'torchSample', 'engineSample'];
      const timings = {} as Record<Measure, Timing>;
      for (const measure of order) {
        timings[measure] = await measures[measure]();
        results[measure].push(timings[measure]);
        // Each measure as it ends too: a long round (Qwen3) leaves figures even if it is stopped.
        const timing = timings[measure];
        console.log(`  ${measure} ${timing.seconds.toFixed(2)} s, ${perSecond(timing)}, peak RSS ${peakRss()}`);
      }
      const train = timings.engineTrain.seconds / timings.torchTrain.seconds;
      const sample = timings.engineSample.seconds / timings.torchSample.seconds;
      ratios.train.push(train);
      ratios.sample.push(sample);
      console.log(
        `round ${round + 1}: training engine ${timings.engineTrain.seconds.toFixed(2)} s (${perSecond(timings.engineTrain)}), ` +
          `torch ${timings.torchTrain.seconds.toFixed(2)} s (${perSecond(timings.torchTrain)}), ratio ${train.toFixed(2)} ` +
          `(gradient norms ${gradientNorm(timings.engineTrain)} / ${gradientNorm(timings.torchTrain)}); ` +
          `sampling engine ${timings.engineSample.seconds.toFixed(2)} s (${perSecond(timings.engineSample)}), ` +
          `torch ${timings.torchSample.seconds.toFixed(2)} s (${perSecond(timings.torchSample)}), ratio ${sample.toFixed(2)}; ` +
          `load average ${loadAverage()}`,
      );
    }

    const summary = (label: string, engine: Timing[], reference: Timing[], ratio: number[]): void => {
      const rate = (timings: Timing[]): string =>
        `${median(timings.map((timing) => timing.tokens / timing.seconds)).toFixed(1)} tokens/s`;
      console.log(
        `${label}: engine ${rate(engine)}, torch ${rate(reference)}; engine / torch median ${median(ratio).toFixed(2)} ` +
          `(rounds ${ratio.map((value) => value.toFixed(2)).join(' ')}; target <= 1.5)`,
      );
    };
    summary(
      `training step (${trainRows} x ${PROMPT + NEW_TOKENS} tokens)`,
      results.engineTrain,
      results.torchTrain,
      ratios.train,
    );
    summary(`sampling (${ROWS} x ${NEW_TOKENS} new tokens)`, results.engineSample, results.torchSample, ratios.sample);
    console.log(
      `engine runtime ${runtime}; peak RSS ${peakRss()} (the engine's: its process, sampling thread and ` +
        `training worker); load average ${loadAverage()}`,
    );
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
    if (!kept) await rm(directory, { recursive: true, force: true });
  }
}

if (!isMainThread) await trainingWorker(workerData as WorkerSetup);
else await main();
