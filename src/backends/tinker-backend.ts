/**
 * The Tinker backend: trains on any server that speaks the Tinker API (hosted Tinker, SkyRL on
 * your own GPUs, ...). The training script's own process runs the local service on loopback, with
 * the Tinker server as its engine: models, checkpoints, jobs, history and the dashboard work as
 * with {@link LocalBackend}, while every completion is rendered and tokenized here, sampled on the
 * server, and every step is trained there. The Tinker client (and its protobuf library, an
 * optional dependency) loads only when the backend connects.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DEFAULT_DATA_DIR, ENV, readEnv } from '../internal/env.js';
import { InvalidArgumentError, PolicyloopError } from '../internal/errors.js';
import { raceSignal } from '../internal/delay.js';
import { option, optionsSchema, parseOptions } from '../internal/option-schema.js';
import { z } from 'zod';
import type {
  Backend,
  BackendConnection,
  LossFn,
  TrainingJobs,
  TrainParams,
  TrainParamsProblem,
} from '../training/backend.js';
import { OBJECTIVE_CONFIG_KEYS, objectiveConfig } from '../training/objective-params.js';
import type { ObjectiveParams } from '../training/objective-params.js';
import { ServiceJobs } from '../training/service-jobs.js';
import { type InProcessServiceOptions, inProcessServiceShape } from './backend-options.js';
import { LocalBackend } from './local-backend.js';
import { DEFAULT_TINKER_LORA_RANK, HOSTED_TINKER_URL, TINKER_DEFAULT_LEARNING_RATE } from './tinker/defaults.js';
import { TINKER_CLIPPED_LOSSES, tinkerLossFunction } from './tinker/loss.js';
import { TINKER_CHECKPOINT_FILE } from './tinker/checkpoint-record.js';

export { DEFAULT_TINKER_LORA_RANK, HOSTED_TINKER_URL, TINKER_DEFAULT_LEARNING_RATE };

/** The key sent to a self-hosted server when none is set (SkyRL checks none; the SDK wants the `tml-` prefix). */
const SELF_HOSTED_KEY = 'tml-policyloop-self-hosted';

/** LoRA settings of the training models a {@link TinkerBackend} creates. */
export interface TinkerLoraOptions {
  /**
   * The adapter's rank (the server caps it: SkyRL's `max_lora_rank`).
   * @default 32
   */
  rank?: number | undefined;
  /** Seed of the adapter's initial weights. @default the server's */
  seed?: number | undefined;
  /** Adapt the MLP layers. @default true */
  trainMlp?: boolean | undefined;
  /** Adapt the attention layers. @default true */
  trainAttn?: boolean | undefined;
  /** Adapt the output (unembedding) layer. @default true */
  trainUnembed?: boolean | undefined;
}

/** Options of {@link TinkerBackend}; `port` is its in-process service's. */
export interface TinkerBackendOptions extends InProcessServiceOptions {
  /**
   * The Tinker server, without `/api/v1`.
   * @default process.env.TINKER_BASE_URL, else hosted Tinker ('https://tinker.thinkingmachines.dev/services/tinker-prod')
   */
  baseURL?: string | undefined;
  /**
   * The Tinker API key (`tml-…`). Required for hosted Tinker; a self-hosted server (SkyRL) checks none.
   * @default process.env.TINKER_API_KEY
   */
  apiKey?: string | undefined;
  /**
   * Directory of the in-process service's store and of the models' local files (history, spool,
   * checkpoint records).
   * @default '.policyloop/tinker'
   */
  dataDir?: string | undefined;
  /** LoRA settings of new training models. @default { rank: 32 } */
  lora?: TinkerLoraOptions | undefined;
  /**
   * Save each step's weights and optimizer state (`save_weights`) besides its sampler weights, so
   * that training resumes when the server has lost its training model (a restart). Off, a step
   * costs one save less, and a lost training model cannot be resumed.
   * @default true
   */
  resumableState?: boolean | undefined;
  /**
   * Time allowed for one Tinker HTTP request that is not a long poll, in milliseconds.
   * @default 60_000
   */
  timeout?: number | undefined;
  /**
   * Time allowed for one Tinker operation (sample, forward/backward, optimizer step, save), from
   * its submission to its result, in milliseconds.
   * @default 900_000
   */
  futureTimeout?: number | undefined;
  /**
   * Retries of a Tinker request that got no answer, a 5xx or a 429.
   * @default 4
   */
  maxRetries?: number | undefined;
  /** `fetch` for the Tinker requests (tests, proxies). @default globalThis.fetch */
  fetch?: typeof globalThis.fetch | undefined;
  /** Environment read for the Hugging Face cache (`HF_HUB_CACHE`, `HF_HOME`). @default process.env */
  env?: NodeJS.ProcessEnv | undefined;
}

/** The check of {@link TinkerBackendOptions}, made at construction (the Tinker client applies its own defaults). */
const TinkerBackendOptionsSchema = optionsSchema<TinkerBackendOptions>()({
  baseURL: option.string().optional(),
  apiKey: option.string().optional(),
  dataDir: option.nonEmptyString().default(path.join(DEFAULT_DATA_DIR, 'tinker')),
  lora: optionsSchema<TinkerLoraOptions>()({
    rank: option.integer({ min: 1 }).optional(),
    seed: option.integer().optional(),
    trainMlp: z.boolean().optional(),
    trainAttn: z.boolean().optional(),
    trainUnembed: z.boolean().optional(),
  }).optional(),
  resumableState: z.boolean().optional(),
  timeout: option.timeout().optional(),
  futureTimeout: option.timeout().optional(),
  maxRetries: option.retryCount().optional(),
  fetch: option.function<typeof globalThis.fetch>().optional(),
  env: option
    .like<NodeJS.ProcessEnv>((env) => typeof env === 'object' && env !== null, 'an environment (like `process.env`)')
    .optional(),
  ...inProcessServiceShape,
});

interface Connected {
  readonly local: LocalBackend;
  readonly connection: BackendConnection;
  close(): Promise<void>;
}

/**
 * A Tinker server as a backend: the same script that trains on {@link LocalBackend} or
 * {@link HostedBackend} trains on hosted Tinker or on SkyRL by changing this one line. The base
 * model's tokenizer files must be on this machine (the Hugging Face cache, or the folder a
 * self-hosted server was started on): requests are rendered and tokenized here.
 * @example
 * const backend = new TinkerBackend(); // TINKER_BASE_URL, TINKER_API_KEY
 * const model = new TrainableModel({ project: 'demo', name: 'agent', baseModel: 'Qwen/Qwen3-8B' });
 * await model.register(backend); // opens a session; the LoRA model is created by the first step
 * const client = model.openai(); // completions sampled on the server, recorded with their token ids
 */
export class TinkerBackend implements Backend {
  /** Always `'tinker'`. */
  readonly kind = 'tinker' as const;
  /** A Tinker server's RL losses (Tinker's `LossFnType` but SFT's `cross_entropy`); `importance_sampling` is the default. SkyRL 0.4.0 has no `dro` and refuses it at the step. */
  readonly lossFns: readonly LossFn[] = ['importance_sampling', 'ppo', 'cispo', 'dro'];
  /**
   * The objective parameters it honours: the advantages are computed on the client
   * (`scaleRewards`, `advantageBalance`), and so is the KL penalty to a reference (`klPenaltyCoef`
   * with its source and reference: the base model, or a step's sampler weights), folded into them
   * as tinker-cookbook does; `epsilon` / `epsilonHigh` become the `ppo` and `cispo` losses'
   * `clip_low_threshold` / `clip_high_threshold` (with `importance_sampling` or `dro`, which have
   * no clip, they are refused). The server's losses take no other knob, so the rest are refused
   * before sampling.
   */
  readonly objectiveParams: readonly (keyof ObjectiveParams)[] = [
    'scaleRewards',
    'advantageBalance',
    'epsilon',
    'epsilonHigh',
    'klPenaltyCoef',
    'klPenaltySource',
    'klPenaltyReferenceStep',
    'klPenaltyStepLag',
    'klRefAdapterPath',
  ];
  /** Absolute directory of the in-process store and the models' local files. */
  readonly dataDir: string;
  /** The Tinker server's base URL. */
  readonly baseURL: string;
  /** The training work on the in-process service (jobs sent, retried, followed). */
  readonly jobs: TrainingJobs = new ServiceJobs(this);
  private readonly apiKey: string;
  private readonly options: z.output<typeof TinkerBackendOptionsSchema>;
  private connecting: Promise<Connected> | undefined;
  private closed = false;

  /** @throws {InvalidArgumentError} for a bad option, or a key that is no option (naming the nearest one). */
  constructor(tinkerOptions?: TinkerBackendOptions) {
    const options = parseOptions(TinkerBackendOptionsSchema, tinkerOptions);
    const baseURL = options.baseURL ?? readEnv(ENV.tinkerBaseURL) ?? HOSTED_TINKER_URL;
    let protocol: string | undefined;
    try {
      protocol = new URL(baseURL).protocol;
    } catch {
      protocol = undefined;
    }
    // `localhost:8000` parses as a URL of scheme `localhost:`: only http(s) reaches a server.
    if (protocol !== 'http:' && protocol !== 'https:')
      throw new InvalidArgumentError(
        'baseURL',
        `Expected \`baseURL\` (or TINKER_BASE_URL) to be an http(s) URL, got ${JSON.stringify(baseURL)}`,
      );
    const apiKey = options.apiKey ?? readEnv(ENV.tinkerApiKey);
    if (apiKey === undefined && baseURL.replace(/\/+$/, '') === HOSTED_TINKER_URL)
      throw new PolicyloopError(
        'No API key for hosted Tinker: set the TINKER_API_KEY environment variable (a `tml-` key from the Tinker console) or pass `new TinkerBackend({ apiKey })`; for a self-hosted server set TINKER_BASE_URL.',
      );
    this.apiKey = apiKey ?? SELF_HOSTED_KEY;
    this.baseURL = baseURL.replace(/\/+$/, '');
    this.options = options;
    this.dataDir = path.resolve(options.dataDir);
  }

  /**
   * Creates a backend and connects at once (opens the Tinker session, starts the in-process service).
   * @example
   * const backend = await TinkerBackend.start({ baseURL: 'http://127.0.0.1:8000' });
   */
  static async start(options: TinkerBackendOptions = {}): Promise<TinkerBackend> {
    const backend = new TinkerBackend(options);
    await backend.connect();
    return backend;
  }

  /**
   * Opens the Tinker session (reading the server's flags and the base models it trains) and starts
   * the in-process service on it, once; later calls return the same connection.
   */
  async connect(options: { signal?: AbortSignal | undefined } = {}): Promise<BackendConnection> {
    if (this.closed) throw new PolicyloopError('This TinkerBackend is closed; create a new one.');
    this.connecting ??= this.open();
    this.connecting.catch(() => {
      this.connecting = undefined;
    });
    return (await raceSignal(this.connecting, options.signal)).connection;
  }

  /**
   * The address of the in-process service's dashboard, signed in (see `LocalBackend.dashboardURL`).
   */
  async dashboardURL(): Promise<string> {
    await this.connect();
    return (await (this.connecting as Promise<Connected>)).local.dashboardURL();
  }

  /**
   * What of a step's parameters a Tinker server cannot honour, checked before anything is sampled
   * (see `Backend.trainParamsProblem`): an objective key given raw in `config` that it does not
   * honour (`config.importance_sampling_level`...), `epsilon` / `epsilonHigh` with a loss that has
   * no clip (`importance_sampling`, the default, or `dro`), and a `klRefAdapterPath` that is not
   * a checkpoint folder of a Tinker-backed model (a Tinker sampler cannot load a PEFT adapter).
   * Whether the server has the loss at all shows only at the step (SkyRL 0.4.0 has no `dro`; the
   * API says nothing of it before).
   * @example
   * new TinkerBackend({ baseURL }).trainParamsProblem({ lossFn: 'dro', epsilon: 0.2 }, 'params')?.parameter; // 'epsilon'
   */
  trainParamsProblem(params: TrainParams, argument: string): TrainParamsProblem | undefined {
    const raw = (params.config ?? {}) as Record<string, unknown>;
    const given = (key: string) => raw[key] !== undefined && raw[key] !== null;
    for (const [name, key] of Object.entries(OBJECTIVE_CONFIG_KEYS) as [keyof ObjectiveParams, string][]) {
      if (this.objectiveParams.includes(name) || params[name] !== undefined || !given(key)) continue;
      return {
        parameter: `config.${key}`,
        message: `Expected \`${argument}.config.${key}\` to be left out: a Tinker server does not honour it (the tinker backend honours ${this.objectiveParams.map((honoured) => `\`${honoured}\``).join(', ')}), and training would silently ignore it.`,
      };
    }
    const config = { ...params.config, ...objectiveConfig(params) };
    const lossFn = params.lossFn ?? tinkerLossFunction(config);
    if (!TINKER_CLIPPED_LOSSES.includes(lossFn)) {
      for (const [name, key] of [
        ['epsilon', 'epsilon'],
        ['epsilonHigh', 'epsilon_high'],
      ] as const) {
        if (params[name] === undefined && !given(key)) continue;
        const parameter = params[name] !== undefined ? name : `config.${key}`;
        return {
          parameter,
          message: `Expected \`${argument}.${parameter}\` to be left out with the ${lossFn} loss${params.lossFn === undefined ? " (the tinker backend's default)" : ''}: it is a clip of the ppo and cispo losses, and a Tinker server's ${lossFn} loss has none. Train with \`lossFn: 'ppo'\` or \`'cispo'\`, or leave it out.`,
        };
      }
    }
    const adapter = config.kl_ref_adapter_path;
    if ((config.kl_penalty_coef ?? 0) > 0 && typeof adapter === 'string') {
      const folder = path.resolve(adapter);
      if (!existsSync(path.join(folder, TINKER_CHECKPOINT_FILE))) {
        const parameter = params.klRefAdapterPath !== undefined ? 'klRefAdapterPath' : 'config.kl_ref_adapter_path';
        return {
          parameter,
          message: `Expected \`${argument}.${parameter}\` to be a checkpoint folder of a Tinker-backed model (one with ${TINKER_CHECKPOINT_FILE}), got ${JSON.stringify(adapter)} (${folder}): a Tinker server samples only its own sampler weights and cannot load a PEFT adapter folder as the KL reference. Name a step of this model (\`klPenaltyReferenceStep\`, \`klPenaltyStepLag\`) instead.`,
        };
      }
    }
    return undefined;
  }

  /** The learning rate of jobs that name none: {@link TINKER_DEFAULT_LEARNING_RATE}. */
  defaultLearningRate(): Promise<number | null> {
    return Promise.resolve(TINKER_DEFAULT_LEARNING_RATE);
  }

  /** A `file://` URL: the in-process service reads SFT data from this machine's disk. */
  localFileUrl(file: string): string {
    return pathToFileURL(path.resolve(file)).href;
  }

  /** Stops the in-process service and the Tinker session's heartbeat; safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const connecting = this.connecting;
    this.connecting = undefined;
    const connected = await connecting?.catch(() => undefined);
    await connected?.close();
  }

  private async open(): Promise<Connected> {
    let tinker: typeof import('./tinker/index.js');
    try {
      tinker = await import('./tinker/index.js');
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && String(error).includes('@bufbuild/protobuf'))
        throw new PolicyloopError(
          'TinkerBackend needs the optional dependency `@bufbuild/protobuf`: `npm install @bufbuild/protobuf`.',
          { cause: error },
        );
      throw error;
    }
    const lora = this.options.lora ?? {};
    const { client, engine } = await tinker.openTinkerEngine({
      baseURL: this.baseURL,
      apiKey: this.apiKey,
      fetch: this.options.fetch,
      timeout: this.options.timeout,
      futureTimeout: this.options.futureTimeout,
      maxRetries: this.options.maxRetries,
      env: this.options.env,
      resumableState: this.options.resumableState,
      lora: {
        rank: lora.rank ?? DEFAULT_TINKER_LORA_RANK,
        seed: lora.seed,
        trainMlp: lora.trainMlp,
        trainAttn: lora.trainAttn,
        trainUnembed: lora.trainUnembed,
      },
    });
    const local = new LocalBackend({
      dataDir: this.dataDir,
      port: this.options.port,
      serviceOptions: { engine },
    });
    const shutdown = async (): Promise<void> => {
      await local.close();
      await engine.close();
      await client.close();
    };
    try {
      if (this.closed) throw new PolicyloopError('This TinkerBackend was closed while it was connecting.');
      const connection = await local.connect();
      return { local, connection, close: shutdown };
    } catch (error) {
      await shutdown();
      throw error;
    }
  }
}
