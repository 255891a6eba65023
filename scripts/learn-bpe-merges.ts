/**
 * Learns the BPE merges of `policyloop/agent-chat` and writes `src/engine/data/bpe-merges.json`.
 *
 *     npx tsx scripts/learn-bpe-merges.ts [--merges 1782] [--documents 4000] [--check]
 *
 * The corpus is generated here (nothing is downloaded): chat-template renderings of JSON tool
 * schemas, English system prompts and user questions, tool calls and JSON tool results of typical
 * agents, built from the word lists below with a seeded generator. The same arguments always give
 * the same merges. `--check` learns them again and fails when the committed file differs.
 *
 * Learning: split every document with the tokenizer's pretokenizer, count the pieces, then merge
 * the most frequent adjacent pair (ties: the smaller pair of ids) until the merge count is reached.
 * A pair whose bytes another token already spells, or that spells a special token's name, is
 * skipped, so every token's bytes are unique and its id can be read back from a logprob's `bytes`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pretokenize } from '../src/engine/bpe.js';
import type { BpeMergesFile } from '../src/engine/bpe.js';
import { renderPrompt } from '../src/engine/chat-template.js';
import { SeededRandom } from '../src/engine/random.js';
import { BYTE_TOKEN_COUNT, SPECIAL_TOKENS, VOCABULARY_SIZE, decodeTokens } from '../src/engine/tokenizer.js';
import type { ChatCompletionMessageParam, ChatCompletionToolParam } from '../src/schema/index.js';

const OUTPUT = fileURLToPath(new URL('../src/engine/data/bpe-merges.json', import.meta.url));

const VERBS = [
  'get',
  'list',
  'find',
  'search',
  'create',
  'update',
  'delete',
  'send',
  'fetch',
  'lookup',
  'check',
  'run',
];
const NOUNS = [
  'weather',
  'forecast',
  'order',
  'orders',
  'customer',
  'invoice',
  'ticket',
  'issue',
  'file',
  'files',
  'email',
  'message',
  'calendar',
  'event',
  'events',
  'user',
  'users',
  'product',
  'products',
  'flight',
  'hotel',
  'booking',
  'document',
  'page',
  'repository',
  'commit',
  'task',
  'tasks',
  'note',
  'notes',
  'price',
  'stock',
  'balance',
  'account',
  'payment',
  'shipment',
  'address',
  'city',
  'country',
  'record',
  'database',
  'query',
  'result',
  'report',
];
const PROPERTY_NAMES = [
  'id',
  'name',
  'query',
  'city',
  'country',
  'date',
  'start_date',
  'end_date',
  'limit',
  'offset',
  'page',
  'email',
  'subject',
  'body',
  'status',
  'priority',
  'amount',
  'currency',
  'unit',
  'units',
  'language',
  'path',
  'content',
  'title',
  'description',
  'tags',
  'user_id',
  'order_id',
  'customer_id',
  'max_results',
  'include_details',
  'sort',
  'timezone',
  'latitude',
  'longitude',
  'url',
  'filter',
  'type',
  'category',
  'quantity',
  'message',
  'reason',
];
const TYPES = ['string', 'string', 'string', 'integer', 'number', 'boolean', 'array'];
const ADJECTIVES = ['current', 'latest', 'open', 'pending', 'active', 'recent', 'full', 'short', 'public', 'private'];
const SENTENCES = [
  'You are a helpful assistant.',
  'You are a careful assistant that answers questions using the tools you are given.',
  'Use the tools to look up facts instead of guessing.',
  'Call one tool at a time and wait for the result before you continue.',
  'If a tool returns an error, tell the user what went wrong and what they can do next.',
  'Answer in at most three sentences.',
  'Be concise and friendly, and do not make up information.',
  'When you are not sure, ask the user a clarifying question.',
  'Always confirm the details with the user before you create, update or delete anything.',
  'Never share internal identifiers, API keys or raw JSON with the user.',
  'Format dates as YYYY-MM-DD and times in the 24-hour clock with the time zone.',
  'The current date is {date}.',
  'You work for {company}, and you help its customers with their {noun}s.',
  'If the request is outside your scope, say so politely.',
  'Think step by step about which tool to call next.',
  'Return the final answer to the user in plain text.',
  'Keep the answer short, then list the facts you used, one per line.',
  'Do not call the same tool twice with the same arguments.',
  'Prefer the most recent data, and say how old it is.',
  'Respond in the language of the user.',
];
const QUESTIONS = [
  'What is the {noun} for {name}?',
  'Can you check the {adjective} {noun} of {name} for me?',
  'Please find all {noun}s from {date} and send a summary to {email}.',
  'How many {noun}s are {adjective} right now?',
  'I need the {noun} details for order {number}, and whether it has shipped.',
  'Could you look up {name} and tell me their {noun}?',
  'Is there any {adjective} {noun} in {city} tomorrow?',
  'Hi! I want to know when my {noun} will arrive in {city}.',
  'Why did my {noun} fail? The reference is {reference}.',
  'Compare the {noun} in {city} with the one in {city2} and tell me which is better.',
];
const COMMON_WORDS = [
  'a',
  'able',
  'about',
  'action',
  'activity',
  'add',
  'after',
  'again',
  'age',
  'agree',
  'air',
  'all',
  'allow',
  'also',
  'an',
  'and',
  'answer',
  'any',
  'appear',
  'are',
  'arm',
  'art',
  'as',
  'asked',
  'at',
  'attention',
  'baby',
  'back',
  'bad',
  'be',
  'because',
  'been',
  'before',
  'begin',
  'being',
  'believe',
  'best',
  'better',
  'between',
  'big',
  'body',
  'book',
  'both',
  'boy',
  'break',
  'bring',
  'build',
  'building',
  'business',
  'but',
  'buy',
  'by',
  'call',
  'came',
  'can',
  'car',
  'care',
  'carry',
  'case',
  'catch',
  'cause',
  'center',
  'change',
  'choose',
  'city',
  'class',
  'clear',
  'college',
  'come',
  'community',
  'company',
  'computer',
  'consider',
  'continue',
  'control',
  'cost',
  'could',
  'couple',
  'court',
  'cover',
  'create',
  'cut',
  'data',
  'day',
  'death',
  'decide',
  'decision',
  'develop',
  'development',
  'did',
  'die',
  'difference',
  'director',
  'do',
  'doctor',
  'does',
  'done',
  'door',
  'draw',
  'drug',
  'during',
  'each',
  'early',
  'easy',
  'eat',
  'education',
  'effect',
  'effort',
  'end',
  'even',
  'event',
  'evidence',
  'expect',
  'experience',
  'explain',
  'eye',
  'face',
  'fact',
  'fall',
  'few',
  'field',
  'figure',
  'film',
  'first',
  'follow',
  'foot',
  'for',
  'force',
  'form',
  'found',
  'free',
  'friend',
  'from',
  'full',
  'further',
  'game',
  'get',
  'girl',
  'give',
  'go',
  'good',
  'great',
  'ground',
  'group',
  'grow',
  'guy',
  'had',
  'hair',
  'happen',
  'hard',
  'has',
  'have',
  'he',
  'head',
  'health',
  'heart',
  'help',
  'her',
  'here',
  'high',
  'him',
  'his',
  'history',
  'hit',
  'hold',
  'hope',
  'hour',
  'house',
  'how',
  'idea',
  'if',
  'image',
  'important',
  'in',
  'include',
  'industry',
  'information',
  'interest',
  'into',
  'is',
  'it',
  'its',
  'job',
  'just',
  'keep',
  'kid',
  'kill',
  'kind',
  'know',
  'land',
  'large',
  'last',
  'late',
  'law',
  'lead',
  'leader',
  'learn',
  'least',
  'left',
  'less',
  'let',
  'level',
  'light',
  'like',
  'line',
  'little',
  'live',
  'local',
  'long',
  'look',
  'lose',
  'lot',
  'love',
  'made',
  'major',
  'make',
  'market',
  'matter',
  'may',
  'me',
  'meet',
  'member',
  'might',
  'mind',
  'minute',
  'model',
  'moment',
  'money',
  'month',
  'more',
  'morning',
  'most',
  'move',
  'movie',
  'music',
  'must',
  'my',
  'name',
  'nation',
  'need',
  'new',
  'news',
  'next',
  'no',
  'north',
  'not',
  'now',
  'number',
  'of',
  'offer',
  'office',
  'official',
  'oil',
  'old',
  'on',
  'once',
  'one',
  'only',
  'open',
  'or',
  'organization',
  'other',
  'others',
  'our',
  'out',
  'over',
  'own',
  'paper',
  'parent',
  'part',
  'party',
  'pass',
  'patient',
  'pay',
  'people',
  'person',
  'phone',
  'picture',
  'piece',
  'place',
  'plan',
  'player',
  'point',
  'police',
  'policy',
  'population',
  'position',
  'practice',
  'president',
  'price',
  'problem',
  'process',
  'produce',
  'product',
  'program',
  'project',
  'provide',
  'public',
  'pull',
  'question',
  'raise',
  'rate',
  'reach',
  'read',
  'real',
  'reason',
  'receive',
  'record',
  'relationship',
  'remain',
  'remember',
  'report',
  'require',
  'research',
  'result',
  'return',
  'right',
  'road',
  'role',
  'said',
  'same',
  'say',
  'season',
  'see',
  'seem',
  'sell',
  'send',
  'sense',
  'serve',
  'service',
  'set',
  'she',
  'short',
  'should',
  'show',
  'side',
  'single',
  'sit',
  'site',
  'situation',
  'small',
  'so',
  'society',
  'some',
  'son',
  'source',
  'space',
  'speak',
  'special',
  'spend',
  'stand',
  'star',
  'start',
  'stay',
  'step',
  'still',
  'stop',
  'story',
  'street',
  'strong',
  'study',
  'such',
  'suggest',
  'support',
  'sure',
  'system',
  'table',
  'take',
  'tax',
  'teacher',
  'team',
  'technology',
  'test',
  'than',
  'that',
  'the',
  'their',
  'them',
  'then',
  'there',
  'these',
  'they',
  'think',
  'this',
  'time',
  'to',
  'told',
  'too',
  'town',
  'tree',
  'true',
  'try',
  'turn',
  'two',
  'type',
  'under',
  'understand',
  'up',
  'us',
  'use',
  'value',
  'very',
  'view',
  'voice',
  'wait',
  'wall',
  'want',
  'war',
  'was',
  'watch',
  'way',
  'we',
  'well',
  'went',
  'were',
  'what',
  'when',
  'where',
  'which',
  'while',
  'who',
  'whole',
  'why',
  'wife',
  'will',
  'window',
  'with',
  'word',
  'work',
  'worker',
  'world',
  'would',
  'write',
  'year',
  'you',
  'young',
  'your',
];
const NAMES = ['Alice', 'Bob', 'Carol', 'Dmitri', 'Emma', 'Farid', 'Grace', 'Hiro', 'Ines', 'Jonas', 'Kofi', 'Lena'];
const CITIES = ['Paris', 'Berlin', 'Oslo', 'Tokyo', 'Lagos', 'Lima', 'Madrid', 'Toronto', 'Sydney', 'Mumbai', 'Prague'];
const COMPANIES = ['Acme Corp', 'Globex', 'Initech', 'Northwind Traders', 'Contoso', 'Umbrella Logistics'];
const STATUS = ['ok', 'open', 'closed', 'pending', 'shipped', 'delivered', 'cancelled', 'confirmed', 'failed'];

function pick<T>(random: SeededRandom, items: readonly T[]): T {
  return items[Math.floor(random.next() * items.length)] as T;
}

function fill(random: SeededRandom, template: string): string {
  return template
    .replaceAll('{noun}', pick(random, NOUNS))
    .replaceAll('{adjective}', pick(random, ADJECTIVES))
    .replaceAll('{name}', pick(random, NAMES))
    .replaceAll('{city2}', pick(random, CITIES))
    .replaceAll('{city}', pick(random, CITIES))
    .replaceAll('{company}', pick(random, COMPANIES))
    .replaceAll('{email}', `${pick(random, NAMES).toLowerCase()}@example.com`)
    .replaceAll('{number}', String(1000 + Math.floor(random.next() * 90_000)))
    .replaceAll('{reference}', `REF-${Math.floor(random.next() * 100_000)}`)
    .replaceAll('{date}', randomDate(random));
}

function randomDate(random: SeededRandom): string {
  const month = String(1 + Math.floor(random.next() * 12)).padStart(2, '0');
  const day = String(1 + Math.floor(random.next() * 28)).padStart(2, '0');
  return `2026-${month}-${day}`;
}

function randomValue(random: SeededRandom, type: string): unknown {
  switch (type) {
    case 'integer':
      return Math.floor(random.next() * 1000);
    case 'number':
      return Math.round(random.next() * 100_000) / 100;
    case 'boolean':
      return random.next() < 0.5;
    case 'array':
      return [pick(random, NOUNS), pick(random, NOUNS)];
    default:
      return random.next() < 0.3 ? randomDate(random) : fill(random, pick(random, ['{name}', '{city}', '{noun}']));
  }
}

function tool(random: SeededRandom): { tool: ChatCompletionToolParam; name: string; properties: [string, string][] } {
  const name = `${pick(random, VERBS)}_${pick(random, NOUNS)}`;
  const count = 1 + Math.floor(random.next() * 4);
  const properties: [string, string][] = [];
  for (let index = 0; index < count; index += 1) properties.push([pick(random, PROPERTY_NAMES), pick(random, TYPES)]);
  const schema: Record<string, unknown> = {};
  for (const [property, type] of properties) {
    const entry: Record<string, unknown> = { type, description: fill(random, `The {adjective} {noun} ${property}.`) };
    if (type === 'array') entry['items'] = { type: 'string' };
    if (type === 'string' && random.next() < 0.2) entry['enum'] = [pick(random, STATUS), pick(random, STATUS)];
    if (type === 'integer' && random.next() < 0.4) Object.assign(entry, { minimum: 1, maximum: 100 });
    schema[property] = entry;
  }
  const parameters: Record<string, unknown> = {
    ...(random.next() < 0.6 ? { $schema: 'http://json-schema.org/draft-07/schema#' } : {}),
    type: 'object',
    properties: schema,
    required: properties.slice(0, 1).map(([property]) => property),
    additionalProperties: false,
  };
  const description = fill(random, 'Returns the {adjective} {noun} for a {noun}, with its status and details.');
  return { tool: { type: 'function', function: { name, description, parameters } }, name, properties };
}

/** One generated conversation, rendered with the chat template: the texts between special tokens. */
function document(random: SeededRandom, index: number): string[] {
  const tools = Array.from({ length: 1 + Math.floor(random.next() * 4) }, () => tool(random));
  const sentences = Array.from({ length: 2 + Math.floor(random.next() * 6) }, () =>
    fill(random, pick(random, SENTENCES)),
  );
  // Plain English beyond the templates: sentences of common words.
  for (let count = Math.floor(random.next() * 4); count > 0; count -= 1) {
    const length = 4 + Math.floor(random.next() * 14);
    const words = Array.from({ length }, () => pick(random, COMMON_WORDS));
    const sentence = words.join(' ');
    sentences.push(`${sentence.charAt(0).toUpperCase()}${sentence.slice(1)}${pick(random, ['.', '.', '?', '!', ','])}`);
  }
  const messages: ChatCompletionMessageParam[] = [{ role: 'system', content: sentences.join(' ') }];
  messages.push({ role: 'user', content: fill(random, pick(random, QUESTIONS)) });
  const turns = 1 + Math.floor(random.next() * 4);
  for (let turn = 0; turn < turns; turn += 1) {
    const chosen = pick(random, tools);
    const args = Object.fromEntries(chosen.properties.map(([property, type]) => [property, randomValue(random, type)]));
    const id = `call_${index}_${turn}`;
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name: chosen.name, arguments: JSON.stringify(args) } }],
    });
    const result: Record<string, unknown> = { status: pick(random, STATUS) };
    for (const [property, type] of chosen.properties) result[property] = randomValue(random, type);
    result['updated_at'] = `${randomDate(random)}T${String(Math.floor(random.next() * 24)).padStart(2, '0')}:00:00Z`;
    messages.push({ role: 'tool', tool_call_id: id, content: JSON.stringify(result) });
  }
  messages.push({
    role: 'assistant',
    content: fill(random, 'The {noun} of {name} is {adjective}. I checked it on {date}.'),
  });
  // Special tokens are never merged with text: learn on the texts between them.
  const texts: string[] = [];
  let run: number[] = [];
  for (const id of renderPrompt(
    messages,
    tools.map((entry) => entry.tool),
  )) {
    if (id < BYTE_TOKEN_COUNT) {
      run.push(id);
      continue;
    }
    if (run.length > 0) texts.push(decodeTokens(run));
    run = [];
  }
  if (run.length > 0) texts.push(decodeTokens(run));
  return texts;
}

function learn(documents: number, mergeCount: number): BpeMergesFile {
  const random = new SeededRandom(20_261_123);
  const counts = new Map<string, number>();
  for (let index = 0; index < documents; index += 1)
    for (const text of document(random, index))
      for (const piece of pretokenize(text)) counts.set(piece, (counts.get(piece) ?? 0) + 1);
  const encoder = new TextEncoder();
  const words = [...counts.entries()].map(([piece, count]) => ({ ids: Array.from(encoder.encode(piece)), count }));
  const bytesOf: number[][] = Array.from({ length: VOCABULARY_SIZE }, (_, id) => (id < BYTE_TOKEN_COUNT ? [id] : []));
  const known = new Set<string>([
    ...bytesOf.slice(0, BYTE_TOKEN_COUNT).map((bytes) => bytes.join(',')),
    ...SPECIAL_TOKENS.map((special) => Array.from(encoder.encode(special)).join(',')),
  ]);
  const key = (left: number, right: number): number => left * 65_536 + right;
  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const addWord = (wordIndex: number, sign: 1 | -1): void => {
    const word = words[wordIndex] as { ids: number[]; count: number };
    for (let index = 0; index + 1 < word.ids.length; index += 1) {
      const pair = key(word.ids[index] as number, word.ids[index + 1] as number);
      pairCounts.set(pair, (pairCounts.get(pair) ?? 0) + sign * word.count);
      if (sign > 0) {
        const set = pairWords.get(pair) ?? new Set<number>();
        pairWords.set(pair, set);
        set.add(wordIndex);
      }
    }
  };
  words.forEach((_, index) => addWord(index, 1));
  const banned = new Set<number>();
  const merges: [number, number][] = [];
  while (merges.length < mergeCount) {
    let best = -1;
    let bestCount = 1;
    for (const [pair, count] of pairCounts)
      if (!banned.has(pair) && (count > bestCount || (count === bestCount && best >= 0 && pair < best))) {
        best = pair;
        bestCount = count;
      }
    if (best < 0) break;
    const left = Math.floor(best / 65_536);
    const right = best % 65_536;
    const bytes = [...(bytesOf[left] as number[]), ...(bytesOf[right] as number[])];
    if (known.has(bytes.join(','))) {
      banned.add(best);
      continue;
    }
    known.add(bytes.join(','));
    const id = VOCABULARY_SIZE + merges.length;
    merges.push([left, right]);
    bytesOf.push(bytes);
    for (const wordIndex of [...(pairWords.get(best) ?? [])]) {
      const word = words[wordIndex] as { ids: number[]; count: number };
      addWord(wordIndex, -1);
      const next: number[] = [];
      for (let index = 0; index < word.ids.length; index += 1) {
        if (index + 1 < word.ids.length && word.ids[index] === left && word.ids[index + 1] === right) {
          next.push(id);
          index += 1;
        } else {
          next.push(word.ids[index] as number);
        }
      }
      word.ids = next;
      addWord(wordIndex, 1);
    }
    pairCounts.delete(best);
  }
  return { format: 'policyloop-bpe-merges', version: 1, merges };
}

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};
const learned = learn(option('--documents', 4000), option('--merges', 1782));
const json = `${JSON.stringify(learned)}\n`;
if (args.includes('--check')) {
  if (readFileSync(OUTPUT, 'utf8') !== json) {
    process.stderr.write(`${OUTPUT} differs from the merges learned now: run npx tsx scripts/learn-bpe-merges.ts\n`);
    process.exit(1);
  }
  process.stdout.write(`${OUTPUT} is up to date (${learned.merges.length} merges)\n`);
} else {
  writeFileSync(OUTPUT, json);
  process.stdout.write(`wrote ${learned.merges.length} merges to ${OUTPUT}\n`);
}
