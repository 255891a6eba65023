/** Corpus of message params, content parts, tool calls and tool definitions. */
import { cases, type CorpusCase } from './case.js';
import { weatherTool } from './fixtures.js';

const textPart = { type: 'text', text: 'Describe the picture.' };
const imagePart = { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'low' } };
const imageDataPart = { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } };
const audioPart = { type: 'input_audio', input_audio: { data: 'UklGRiQAAABXQVZF', format: 'wav' } };
const filePart = { type: 'file', file: { file_data: 'data:application/pdf;base64,JVBERi0=', filename: 'a.pdf' } };
const fileIdPart = { type: 'file', file: { file_id: 'file-abc123' } };
const refusalPart = { type: 'refusal', refusal: 'I cannot help with that.' };
const functionToolCall = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } };
const customToolCall = { id: 'call_2', type: 'custom', custom: { name: 'python', input: 'print(1 + 1)' } };

export const messageCases: CorpusCase[] = [
  ...cases('ChatCompletionContentPartTextParam', true, [
    ['plain', textPart],
    ['empty-text', { type: 'text', text: '' }],
    ['extra-key', { type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }],
  ]),
  ...cases('ChatCompletionContentPartTextParam', false, [
    ['wrong-type', { type: 'refusal', text: 'hi' }],
    ['missing-text', { type: 'text' }],
    ['text-not-string', { type: 'text', text: 42 }],
  ]),
  ...cases('ChatCompletionContentPartRefusalParam', true, [['plain', refusalPart]]),
  ...cases('ChatCompletionContentPartRefusalParam', false, [['missing-refusal', { type: 'refusal' }]]),
  ...cases('ImageURL', true, [
    ['url-only', { url: 'https://example.com/a.png' }],
    ['detail-high', { url: 'https://example.com/a.png', detail: 'high' }],
  ]),
  ...cases('ImageURL', false, [
    ['bad-detail', { url: 'https://example.com/a.png', detail: 'medium' }],
    ['missing-url', { detail: 'auto' }],
  ]),
  ...cases('ChatCompletionContentPartImageParam', true, [
    ['url', imagePart],
    ['data-url', imageDataPart],
  ]),
  ...cases('ChatCompletionContentPartImageParam', false, [['url-as-string', { type: 'image_url', image_url: 'https://x/a.png' }]]),
  ...cases('InputAudio', true, [['mp3', { data: 'SUQz', format: 'mp3' }]]),
  ...cases('InputAudio', false, [['flac', { data: 'ZkxhQw==', format: 'flac' }]]),
  ...cases('ChatCompletionContentPartInputAudioParam', true, [['wav', audioPart]]),
  ...cases('ChatCompletionContentPartInputAudioParam', false, [['missing-audio', { type: 'input_audio' }]]),
  ...cases('FileFile', true, [
    ['empty', {}],
    ['all-fields', { file_data: 'JVBERi0=', file_id: 'file-1', filename: 'a.pdf' }],
  ]),
  ...cases('FileFile', false, [['filename-number', { filename: 7 }]]),
  ...cases('ChatCompletionContentPartFileParam', true, [
    ['data', filePart],
    ['id', fileIdPart],
  ]),
  ...cases('ChatCompletionContentPartFileParam', false, [['missing-file', { type: 'file' }]]),
  ...cases('ChatCompletionContentPart', true, [
    ['text', textPart],
    ['image', imagePart],
    ['audio', audioPart],
    ['file', filePart],
  ]),
  ...cases('ChatCompletionContentPart', false, [
    ['refusal-not-a-user-part', refusalPart],
    ['unknown-type', { type: 'video_url', video_url: { url: 'https://x/v.mp4' } }],
    ['no-type', { text: 'hi' }],
  ]),
  ...cases('FunctionCall', true, [
    ['plain', { name: 'get_weather', arguments: '{}' }],
    ['empty-arguments', { name: 'f', arguments: '' }],
  ]),
  ...cases('FunctionCall', false, [
    ['arguments-object', { name: 'get_weather', arguments: { city: 'Paris' } }],
    ['missing-name', { arguments: '{}' }],
  ]),
  ...cases('Custom', true, [['plain', { name: 'python', input: 'x = 1' }]]),
  ...cases('Custom', false, [['missing-input', { name: 'python' }]]),
  ...cases('ChatCompletionMessageFunctionToolCall', true, [
    ['plain', functionToolCall],
    ['extra-key', { ...functionToolCall, index: 0 }],
  ]),
  ...cases('ChatCompletionMessageFunctionToolCall', false, [
    ['missing-id', { type: 'function', function: { name: 'f', arguments: '{}' } }],
    ['wrong-type', { ...functionToolCall, type: 'custom' }],
  ]),
  ...cases('ChatCompletionMessageCustomToolCall', true, [['plain', customToolCall]]),
  ...cases('ChatCompletionMessageCustomToolCall', false, [['function-body', { id: 'c', type: 'custom', function: { name: 'f', arguments: '' } }]]),
  ...cases('ChatCompletionMessageToolCall', true, [
    ['function', functionToolCall],
    ['custom', customToolCall],
  ]),
  ...cases('ChatCompletionMessageToolCall', false, [
    ['unknown-type', { id: 'c', type: 'web_search', web_search: {} }],
    ['custom-missing-custom', { id: 'c', type: 'custom' }],
  ]),
  ...cases('ChatCompletionMessageFunctionToolCallParam', true, [['plain', functionToolCall]]),
  ...cases('ChatCompletionMessageFunctionToolCallParam', false, [['arguments-missing', { id: 'c', type: 'function', function: { name: 'f' } }]]),
  ...cases('ChatCompletionMessageCustomToolCallParam', true, [['plain', customToolCall]]),
  ...cases('ChatCompletionMessageCustomToolCallParam', false, [['input-number', { id: 'c', type: 'custom', custom: { name: 'p', input: 1 } }]]),
  ...cases('FunctionDefinition', true, [
    ['name-only', { name: 'noop' }],
    ['full', weatherTool.function],
    ['strict-true', { name: 'f', parameters: { type: 'object', properties: {} }, strict: true }],
  ]),
  ...cases('FunctionDefinition', false, [
    ['missing-name', { description: 'no name' }],
    ['parameters-array', { name: 'f', parameters: [] }],
    ['strict-string', { name: 'f', strict: 'yes' }],
  ]),
  ...cases('ChatCompletionFunctionToolParam', true, [['weather', weatherTool]]),
  ...cases('ChatCompletionFunctionToolParam', false, [
    ['missing-function', { type: 'function' }],
    ['custom-type', { type: 'custom', function: { name: 'f' } }],
  ]),
  ...cases('ChatCompletionCustomToolParam', true, [
    ['plain', { type: 'custom', custom: { name: 'python' } }],
    ['grammar', { type: 'custom', custom: { name: 'sql', description: 'SQL', format: { type: 'grammar', grammar: { syntax: 'lark', definition: 'start: "x"' } } } }],
  ]),
  ...cases('ChatCompletionCustomToolParam', false, [
    ['missing-name', { type: 'custom', custom: {} }],
    ['format-without-type', { type: 'custom', custom: { name: 'sql', format: { grammar: {} } } }],
  ]),
  ...cases('ChatCompletionToolParam', true, [
    ['function', weatherTool],
    ['custom', { type: 'custom', custom: { name: 'python' } }],
  ]),
  ...cases('ChatCompletionToolParam', false, [['unknown-type', { type: 'file_search' }]]),
  ...cases('ChatCompletionDeveloperMessageParam', true, [
    ['string', { role: 'developer', content: 'Be brief.' }],
    ['parts-and-name', { role: 'developer', content: [textPart], name: 'ops' }],
  ]),
  ...cases('ChatCompletionDeveloperMessageParam', false, [
    ['image-part', { role: 'developer', content: [imagePart] }],
    ['missing-content', { role: 'developer' }],
  ]),
  ...cases('ChatCompletionSystemMessageParam', true, [
    ['string', { role: 'system', content: 'You are a weather bot.' }],
    ['parts', { role: 'system', content: [textPart, { type: 'text', text: 'Second.' }] }],
  ]),
  ...cases('ChatCompletionSystemMessageParam', false, [
    ['wrong-role', { role: 'developer', content: 'x' }],
    ['null-content', { role: 'system', content: null }],
  ]),
  ...cases('ChatCompletionUserMessageParam', true, [
    ['string', { role: 'user', content: 'Weather in Paris?' }],
    ['every-part-kind', { role: 'user', content: [textPart, imagePart, imageDataPart, audioPart, filePart, fileIdPart], name: 'alice' }],
    ['empty-parts', { role: 'user', content: [] }],
  ]),
  ...cases('ChatCompletionUserMessageParam', false, [
    ['refusal-part', { role: 'user', content: [refusalPart] }],
    ['missing-role', { content: 'hi' }],
    ['content-number', { role: 'user', content: 3 }],
  ]),
  ...cases('AudioReference', true, [['plain', { id: 'audio_abc' }]]),
  ...cases('AudioReference', false, [['missing-id', {}]]),
  ...cases('ChatCompletionAssistantMessageParam', true, [
    ['role-only', { role: 'assistant' }],
    ['string', { role: 'assistant', content: 'Sunny.' }],
    ['text-and-refusal-parts', { role: 'assistant', content: [{ type: 'text', text: 'No.' }, refusalPart] }],
    ['tool-calls-function-and-custom', { role: 'assistant', content: null, tool_calls: [functionToolCall, customToolCall] }],
    [
      'every-field',
      {
        role: 'assistant',
        content: 'ok',
        audio: { id: 'audio_abc' },
        function_call: { name: 'f', arguments: '{}' },
        name: 'bot',
        refusal: null,
        tool_calls: [],
      },
    ],
    ['nulls', { role: 'assistant', content: null, audio: null, function_call: null, refusal: null }],
  ]),
  ...cases('ChatCompletionAssistantMessageParam', false, [
    ['tool-calls-null', { role: 'assistant', content: 'x', tool_calls: null }],
    ['image-part', { role: 'assistant', content: [imagePart] }],
    ['bad-tool-call', { role: 'assistant', tool_calls: [{ id: 'c', type: 'function' }] }],
  ]),
  ...cases('ChatCompletionToolMessageParam', true, [
    ['string', { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }],
    ['parts', { role: 'tool', tool_call_id: 'call_2', content: [textPart] }],
  ]),
  ...cases('ChatCompletionToolMessageParam', false, [
    ['missing-tool-call-id', { role: 'tool', content: 'x' }],
    ['null-content', { role: 'tool', tool_call_id: 'c', content: null }],
  ]),
  ...cases('ChatCompletionFunctionMessageParam', true, [
    ['string', { role: 'function', name: 'get_weather', content: '21' }],
    ['null-content', { role: 'function', name: 'get_weather', content: null }],
  ]),
  ...cases('ChatCompletionFunctionMessageParam', false, [
    ['missing-content', { role: 'function', name: 'get_weather' }],
    ['missing-name', { role: 'function', content: 'x' }],
  ]),
  ...cases('ChatCompletionMessageParam', true, [
    ['developer', { role: 'developer', content: 'x' }],
    ['system', { role: 'system', content: 'x' }],
    ['user', { role: 'user', content: [textPart, imagePart] }],
    ['assistant', { role: 'assistant', tool_calls: [functionToolCall] }],
    ['tool', { role: 'tool', tool_call_id: 'call_1', content: 'x' }],
    ['function', { role: 'function', name: 'f', content: null }],
  ]),
  ...cases('ChatCompletionMessageParam', false, [
    ['unknown-role', { role: 'critic', content: 'x' }],
    ['no-role', { content: 'x' }],
    ['user-without-content', { role: 'user' }],
    ['not-an-object', 'hello'],
  ]),
];
