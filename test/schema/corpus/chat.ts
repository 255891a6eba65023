/** Corpus of chat-completions requests and responses, model lists, SFT rows and list queries. */
import { cases, type CorpusCase } from './case.js';
import { bareChoice, EVENT_IDS, textChoice, toolCallChoice, weatherTool } from './fixtures.js';

const messages = [
  { role: 'system', content: 'You are a weather bot.' },
  { role: 'user', content: 'Weather in Paris?' },
];
const usage = { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 };
const completion = {
  id: 'chatcmpl-123',
  object: 'chat.completion',
  created: 1750000000,
  model: 'wandb-artifact:///my-team/weather/agent-001:step3',
  choices: [textChoice],
  usage,
  system_fingerprint: null,
  prompt_logprobs: null,
};

const { usage: _usage, ...completionWithoutUsage } = completion;

export const chatCases: CorpusCase[] = [
  ...cases('ChatCompletionRequest', true, [
    ['minimal', { model: 'tiny', messages }],
    ['loose-messages', { model: 'tiny', messages: [{ anything: 1 }], whatever: true }],
  ]),
  ...cases('ChatCompletionRequest', false, [
    ['missing-model', { messages }],
    ['message-string', { model: 'tiny', messages: ['hi'] }],
    ['messages-object', { model: 'tiny', messages: {} }],
  ]),
  ...cases('ChatCompletionRequestBody', true, [
    [
      'art-rollout',
      {
        model: 'wandb-artifact:///my-team/weather/agent-001',
        messages,
        logprobs: true,
        top_logprobs: 0,
        tools: [weatherTool],
        tool_choice: 'auto',
        max_completion_tokens: 256,
        temperature: 1,
        extra_body: { return_tokens_as_token_ids: true },
      },
    ],
    [
      'every-typed-key',
      {
        model: 'tiny',
        messages,
        n: 4,
        max_tokens: 64,
        max_completion_tokens: 64,
        temperature: 0.7,
        top_p: 0.9,
        stop: ['\n\n'],
        seed: 7,
        logprobs: true,
        top_logprobs: 5,
        tools: [weatherTool, { type: 'custom', custom: { name: 'python' } }],
        tool_choice: { type: 'function', function: { name: 'get_weather' } },
        parallel_tool_calls: false,
        stream: true,
        stream_options: { include_usage: true },
        return_tokens_as_token_ids: true,
      },
    ],
    // `messages.push(completion.choices[0].message)`: the response message, echoed back.
    ['echoed-response-message', { model: 'tiny', messages: [...messages, textChoice.message, { ...textChoice.message, tool_calls: null }, { role: 'user', content: 'And tomorrow?' }] }],
    ['openai-sdk-nulls', { model: 'tiny', messages, n: null, stop: null, seed: null, tools: null, tool_choice: null, stream: false }],
  ]),
  ...cases('ChatCompletionRequestBody', false, [
    ['no-messages', { model: 'tiny', messages: [] }],
    ['n-zero', { model: 'tiny', messages, n: 0 }],
    ['temperature-high', { model: 'tiny', messages, temperature: 3 }],
    ['top-logprobs-high', { model: 'tiny', messages, top_logprobs: 21 }],
    ['bad-role', { model: 'tiny', messages: [{ role: 'bot', content: 'x' }] }],
    ['stop-five', { model: 'tiny', messages, stop: ['a', 'b', 'c', 'd', 'e'] }],
    ['tool-choice-unknown', { model: 'tiny', messages, tool_choice: 'sometimes' }],
  ]),
  ...cases('ChatCompletionToolChoice', true, [
    ['required', 'required'],
    ['named-custom', { type: 'custom', custom: { name: 'python' } }],
  ]),
  ...cases('ChatCompletionToolChoice', false, [['named-missing-name', { type: 'function', function: {} }]]),
  ...cases('CompletionUsage', true, [['plain', usage]]),
  ...cases('CompletionUsage', false, [['missing-total', { prompt_tokens: 1, completion_tokens: 1 }]]),
  ...cases('ChatCompletionResult', true, [
    ['two-choices', { choices: [textChoice, toolCallChoice], usage }],
  ]),
  ...cases('ChatCompletionResult', false, [['missing-usage', { choices: [bareChoice] }]]),
  ...cases('ChatCompletionResponseBody', true, [
    ['vllm', completion],
    ['no-usage', completionWithoutUsage],
  ]),
  ...cases('ChatCompletionResponseBody', false, [
    ['chunk-object', { ...completion, object: 'chat.completion.chunk' }],
    ['missing-id', { object: 'chat.completion', created: 1, model: 'm', choices: [] }],
    ['bad-choice', { ...completion, choices: [{ index: 0 }] }],
  ]),
  ...cases('ChatCompletionChunk', true, [
    [
      'delta',
      {
        id: 'chatcmpl-1',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'tiny',
        choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null, logprobs: null }],
      },
    ],
  ]),
  ...cases('ChatCompletionChunk', false, [
    ['completion-object', { id: 'c', object: 'chat.completion', created: 1, model: 'm', choices: [] }],
  ]),
  ...cases('ChatMessage', true, [
    ['content-anything', { content: [1, 2] }],
    ['empty', {}],
  ]),
  ...cases('ChatMessage', false, [['array', []]]),
  ...cases('ChatChoice', true, [
    ['full-choice', textChoice],
    ['null-message', { message: null }],
  ]),
  ...cases('ChatChoice', false, [['message-string', { message: 'hi' }]]),
  ...cases('ChatCompletionResponse', true, [
    ['full', completion],
    ['empty', {}],
  ]),
  ...cases('ChatCompletionResponse', false, [['choices-object', { choices: {} }]]),
  ...cases('SFTRow', true, [
    ['two-turns', { messages: [...messages, { role: 'assistant', content: 'Sunny.' }] }],
    [
      'tools',
      {
        messages: [
          { role: 'user', content: 'Weather?' },
          { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        ],
        tools: [weatherTool],
      },
    ],
  ]),
  ...cases('SFTRow', false, [
    ['no-messages', { messages: [] }],
    ['choice-not-message', { messages: [bareChoice] }],
  ]),
  ...cases('InferenceModel', true, [
    ['openai', { id: 'OpenPipe/Qwen3-14B-Instruct', object: 'model', created: 1750000000, owned_by: 'coreweave' }],
    ['id-only', { id: 'wandb-artifact:///team/proj/agent-001' }],
    ['root', { id: 'wandb-artifact:///team/proj/agent-001:step3', object: 'model', created: 1, root: 'Qwen/Qwen3-14B' }],
  ]),
  ...cases('InferenceModel', false, [
    ['object-file', { id: 'x', object: 'file' }],
    ['root-number', { id: 'x', root: 1 }],
  ]),
  ...cases('InferenceModelList', true, [
    ['list', { object: 'list', data: [{ id: 'a', object: 'model', created: 1, owned_by: 'me' }] }],
  ]),
  ...cases('InferenceModelList', false, [['array', [{ id: 'a' }]]]),
  ...cases('PageQuery', true, [
    ['query-strings', { after: EVENT_IDS[0], limit: '100' }],
    ['empty', {}],
  ]),
  ...cases('PageQuery', false, [
    ['limit-zero', { limit: '0' }],
    ['limit-too-big', { limit: '500' }],
    ['limit-word', { limit: 'ten' }],
  ]),
  ...cases('CheckpointListQuery', true, [['desc', { limit: '1', order: 'desc' }]]),
  ...cases('CheckpointListQuery', false, [['order-random', { order: 'random' }]]),
  ...cases('EventListQuery', true, [['long-poll', { limit: '5', wait_ms: '500' }]]),
  ...cases('EventListQuery', false, [['wait-too-long', { wait_ms: '30001' }]]),
];
