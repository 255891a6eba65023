/**
 * Whether a Hugging Face model folder is one the engine can serve, told from its files without
 * loading the model: `config.json` names a supported architecture with the numbers the engine
 * needs, `tokenizer.json` and `tokenizer_config.json` are there and hold JSON objects, a chat
 * template is there (`chat_template.jinja`, or `chat_template` in `tokenizer_config.json`), and
 * the weights are there whole (`model.safetensors`, or `model.safetensors.index.json` with every
 * shard it names), each file's tensors inside the file and of a float type the engine reads. The
 * answer is kept while the files' sizes and times stay the same, so asking again is cheap.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseHfConfig, SUPPORTED_ARCHITECTURES } from './config.js';

/** Files of a model folder the check reads. */
const CONFIG = 'config.json';
const TOKENIZER = 'tokenizer.json';
const TOKENIZER_CONFIG = 'tokenizer_config.json';
const CHAT_TEMPLATE = 'chat_template.jinja';
const WEIGHTS = 'model.safetensors';
const WEIGHTS_INDEX = 'model.safetensors.index.json';
/** Float types the engine widens to float32. */
const FLOAT_TYPES: Readonly<Record<string, number>> = { F32: 4, F16: 2, BF16: 2 };
/** A safetensors header longer than this is not one (the reference writer caps it at 100 MB). */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

/** What a folder needs, for the messages that refuse one. */
export const SUPPORTED_FOLDERS =
  `Supported: a folder as \`huggingface-cli download\` leaves an instruct model, with ${CONFIG} naming ` +
  `${SUPPORTED_ARCHITECTURES.join(' or ')}, ${TOKENIZER}, ${TOKENIZER_CONFIG} with a chat template ` +
  `(or ${CHAT_TEMPLATE}), and ${WEIGHTS} (or ${WEIGHTS_INDEX} with its shards) in F32, BF16 or F16.`;

/** Options of {@link modelFolderProblem}. */
export interface FolderCheckOptions {
  /**
   * Check the text files (tokenizer, tokenizer config, chat template). Off when the engine gets
   * its text layer elsewhere (tests inject one). @default true
   */
  readonly textFiles?: boolean | undefined;
}

const checked = new Map<string, { readonly signature: string; readonly problem: string | null }>();

/**
 * Why the engine cannot serve the model folder `directory` (a sentence naming the folder and the
 * missing or broken file, or the architecture), or null when it can, as far as the files tell
 * without loading the weights.
 * @example
 * const problem = modelFolderProblem('/models/gpt2');
 * // '/models/gpt2/config.json: architecture GPT2LMHeadModel is not supported: the engine computes LlamaForCausalLM and Qwen3ForCausalLM.'
 */
export function modelFolderProblem(directory: string, options: FolderCheckOptions = {}): string | null {
  const folder = path.resolve(directory);
  const textFiles = options.textFiles ?? true;
  const key = `${textFiles ? 'text' : 'weights'}\n${folder}`;
  const signature = folderSignature(folder);
  const known = checked.get(key);
  if (known !== undefined && known.signature === signature) return known.problem;
  let problem: string | null;
  try {
    problem = check(folder, textFiles);
  } catch (error) {
    problem = `The model folder ${folder} could not be read: ${error instanceof Error ? error.message : String(error)}`;
  }
  checked.set(key, { signature, problem });
  return problem;
}

/** Sizes and times of the files the check reads: a change in any of them checks the folder again. */
function folderSignature(folder: string): string {
  const parts: string[] = [];
  const add = (file: string): void => {
    try {
      const stat = statSync(path.join(folder, file));
      parts.push(`${file}:${stat.size}:${stat.mtimeMs}`);
    } catch {
      parts.push(`${file}:-`);
    }
  };
  for (const file of [CONFIG, TOKENIZER, TOKENIZER_CONFIG, CHAT_TEMPLATE, WEIGHTS, WEIGHTS_INDEX]) add(file);
  for (const shard of shardNames(folder) ?? []) add(shard);
  return parts.join('|');
}

function check(folder: string, textFiles: boolean): string | null {
  if (!existsSync(folder)) return `The model folder ${folder} does not exist.`;
  if (!statSync(folder).isDirectory()) return `${folder} is not a folder: expected a model folder.`;
  const config = readJsonObject(folder, CONFIG, 'the model configuration');
  if (typeof config === 'string') return config;
  try {
    parseHfConfig(config, path.join(folder, CONFIG));
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  if (textFiles) {
    const tokenizer = readJsonObject(folder, TOKENIZER, 'the tokenizer');
    if (typeof tokenizer === 'string') return tokenizer;
    const model = tokenizer['model'];
    if (typeof model !== 'object' || model === null || Array.isArray(model))
      return `Expected the tokenizer in ${path.join(folder, TOKENIZER)} (a JSON object with a "model"), got an object without one.`;
    const tokenizerConfig = readJsonObject(folder, TOKENIZER_CONFIG, 'the tokenizer configuration');
    if (typeof tokenizerConfig === 'string') return tokenizerConfig;
    const template = tokenizerConfig['chat_template'];
    if (!existsSync(path.join(folder, CHAT_TEMPLATE)) && typeof template !== 'string' && !Array.isArray(template))
      return `The model folder ${folder} has no chat template (neither ${CHAT_TEMPLATE} nor a chat_template in ${TOKENIZER_CONFIG}): chat completions and training render conversations with it, so the engine serves instruct models only.`;
  }
  return weightsProblem(folder);
}

/** The JSON object in `folder/file`, or a sentence saying why there is none. */
function readJsonObject(folder: string, file: string, what: string): Record<string, unknown> | string {
  const full = path.join(folder, file);
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch {
    return `The model folder ${folder} has no ${file} (${what}).`;
  }
  if (text.trim() === '') return `${full} is empty: expected ${what} as a JSON object (download the folder again).`;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `Expected ${what} as a JSON object in ${full}, got unparseable text (${error instanceof Error ? error.message : String(error)}).`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    return `Expected ${what} as a JSON object in ${full}, got ${JSON.stringify(value)?.slice(0, 80)}.`;
  return value as Record<string, unknown>;
}

/** The shard files an index names, or null without a readable index. */
function shardNames(folder: string): string[] | null {
  try {
    const index = JSON.parse(readFileSync(path.join(folder, WEIGHTS_INDEX), 'utf8')) as { weight_map?: unknown };
    const map = index.weight_map;
    if (typeof map !== 'object' || map === null) return null;
    return [...new Set(Object.values(map as Record<string, unknown>).filter((file) => typeof file === 'string'))];
  } catch {
    return null;
  }
}

function weightsProblem(folder: string): string | null {
  if (existsSync(path.join(folder, WEIGHTS))) return safetensorsProblem(path.join(folder, WEIGHTS));
  if (!existsSync(path.join(folder, WEIGHTS_INDEX)))
    return `The model folder ${folder} has no ${WEIGHTS} (nor ${WEIGHTS_INDEX} for sharded weights).`;
  const shards = shardNames(folder);
  if (shards === null)
    return `Expected a "weight_map" object of tensor names to shard files in ${path.join(folder, WEIGHTS_INDEX)}, got none.`;
  for (const shard of shards) {
    const file = path.join(folder, shard);
    if (!existsSync(file))
      return `The model folder ${folder} lacks the weight shard ${shard} named by ${WEIGHTS_INDEX}.`;
    const problem = safetensorsProblem(file);
    if (problem !== null) return problem;
  }
  return null;
}

/** Reads a safetensors file's header only: every tensor a float type the engine reads, inside the file. */
function safetensorsProblem(file: string): string | null {
  const descriptor = openSync(file, 'r');
  try {
    const size = fstatSync(descriptor).size;
    const cut = (what: string) =>
      `${file} is cut short or is not a safetensors file: ${what} (an interrupted download? download it again).`;
    if (size < 8) return cut(`it has ${size} bytes`);
    const prefix = Buffer.alloc(8);
    readSync(descriptor, prefix, 0, 8, 0);
    const headerLength = Number(prefix.readBigUInt64LE(0));
    if (headerLength > MAX_HEADER_BYTES || 8 + headerLength > size)
      return cut(`its header claims ${headerLength} bytes, but the file has ${size}`);
    const headerBytes = Buffer.alloc(headerLength);
    readSync(descriptor, headerBytes, 0, headerLength, 8);
    let header: unknown;
    try {
      header = JSON.parse(headerBytes.toString('utf8'));
    } catch {
      return cut('its header is not JSON');
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header))
      return cut('its header is not an object');
    const dataLength = size - 8 - headerLength;
    for (const [name, value] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') continue;
      const entry = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const offsets = entry?.data_offsets;
      if (!Array.isArray(offsets) || !Array.isArray(entry.shape) || typeof entry.dtype !== 'string')
        return cut(`tensor ${name} has no {dtype, shape, data_offsets}`);
      const width = FLOAT_TYPES[entry.dtype];
      if (width === undefined)
        return `${file}: tensor ${name} is ${entry.dtype}; the engine reads F32, BF16 and F16 weights only (not quantized ones).`;
      const [begin, end] = offsets as unknown[];
      if (typeof begin !== 'number' || typeof end !== 'number' || !(begin >= 0 && begin <= end))
        return cut(`tensor ${name} has data_offsets ${JSON.stringify(offsets)}`);
      if (end > dataLength)
        return cut(`tensor ${name} ends at data byte ${end}, but the file holds ${dataLength} data bytes`);
      const count = (entry.shape as unknown[]).reduce<number>((product, dimension) => product * Number(dimension), 1);
      if (count * width !== end - begin)
        return cut(`tensor ${name} has ${end - begin} bytes for shape ${JSON.stringify(entry.shape)}`);
    }
    return null;
  } finally {
    closeSync(descriptor);
  }
}
