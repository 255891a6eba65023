/** Corpus of choices, model messages, logprobs and annotations. */
import { cases, type CorpusCase } from './case.js';
import { bareChoice, textChoice, tokenIdLogprobs, toolCallChoice } from './fixtures.js';

const citation = { end_index: 10, start_index: 0, title: 'Weather', url: 'https://example.com/w' };

export const choiceCases: CorpusCase[] = [
  ...cases('TopLogprob', true, [
    ['token-id', { token: 'token_id:17', bytes: null, logprob: -3.2 }],
    ['no-bytes', { token: 'Hello', logprob: 0 }],
  ]),
  ...cases('TopLogprob', false, [
    ['missing-logprob', { token: 'a' }],
    ['bytes-floats', { token: 'a', logprob: -1, bytes: [1.5] }],
  ]),
  ...cases('ChatCompletionTokenLogprob', true, [
    ['token-id', tokenIdLogprobs.content[0]],
    ['extra-key', { token: 'a', logprob: -1, top_logprobs: [], rank: 1 }],
  ]),
  ...cases('ChatCompletionTokenLogprob', false, [
    ['missing-top-logprobs', { token: 'a', logprob: -1 }],
    ['logprob-string', { token: 'a', logprob: '-1', top_logprobs: [] }],
  ]),
  ...cases('TokenLogprob', true, [['alias', { token: 'token_id:5', bytes: [104], logprob: -0.5, top_logprobs: [] }]]),
  ...cases('ChoiceLogprobs', true, [
    ['token-ids', tokenIdLogprobs],
    ['empty', {}],
    ['both-null', { content: null, refusal: null }],
  ]),
  ...cases('ChoiceLogprobs', false, [['content-object', { content: { token: 'a' } }]]),
  ...cases('AnnotationURLCitation', true, [['plain', citation]]),
  ...cases('AnnotationURLCitation', false, [['index-float', { ...citation, end_index: 1.5 }]]),
  ...cases('Annotation', true, [['url-citation', { type: 'url_citation', url_citation: citation }]]),
  ...cases('Annotation', false, [['other-type', { type: 'file_citation', url_citation: citation }]]),
  ...cases('ChatCompletionAudio', true, [['plain', { id: 'a', data: 'UklGRg==', expires_at: 1750000000, transcript: 'hi' }]]),
  ...cases('ChatCompletionAudio', false, [['missing-transcript', { id: 'a', data: 'UklGRg==', expires_at: 1 }]]),
  ...cases('ChatCompletionMessage', true, [
    ['role-only', { role: 'assistant' }],
    ['vllm-dump', textChoice.message],
    ['tool-calls', toolCallChoice.message],
    ['annotations', { role: 'assistant', content: 'See source.', annotations: [{ type: 'url_citation', url_citation: citation }] }],
    ['audio', { role: 'assistant', content: null, audio: { id: 'a', data: 'UklGRg==', expires_at: 1, transcript: 'hi' } }],
    ['function-call', { role: 'assistant', content: null, function_call: { name: 'f', arguments: '{}' } }],
  ]),
  ...cases('ChatCompletionMessage', false, [
    ['missing-role', { content: 'hi' }],
    ['user-role', { role: 'user', content: 'hi' }],
    ['content-parts', { role: 'assistant', content: [{ type: 'text', text: 'hi' }] }],
    ['bad-tool-call', { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f' } }] }],
  ]),
  ...cases('FinishReason', true, [
    ['stop', 'stop'],
    ['function-call', 'function_call'],
  ]),
  ...cases('FinishReason', false, [
    ['abort', 'abort'],
    ['null', null],
  ]),
  ...cases('Choice', true, [
    ['vllm-token-ids', textChoice],
    ['tool-calls', toolCallChoice],
    ['no-logprobs', bareChoice],
    ['null-logprobs', { ...bareChoice, logprobs: null }],
    ['content-filter', { finish_reason: 'content_filter', index: 2, logprobs: null, message: { role: 'assistant', content: null, refusal: 'No.' } }],
  ]),
  ...cases('Choice', false, [
    ['missing-finish-reason', { index: 0, message: { role: 'assistant', content: 'x' } }],
    ['unknown-finish-reason', { ...bareChoice, finish_reason: 'abort' }],
    ['index-string', { ...bareChoice, index: '0' }],
    ['message-without-role', { ...bareChoice, message: { content: 'x' } }],
    ['missing-message', { finish_reason: 'stop', index: 0 }],
    ['logprobs-array', { ...bareChoice, logprobs: [] }],
  ]),
];
