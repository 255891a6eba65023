/**
 * Chat messages as the wire carries them: the six OpenAI message params, their content parts,
 * tool calls and tool definitions. Every object here keeps unknown keys (`z.looseObject`): the
 * newer contract marks them all open (`additionalProperties: true`), the older never closes them,
 * and real clients add keys of their own (`cache_control`, `reasoning_content`, ...).
 */
import { z } from 'zod';

/** A text content part `{type: "text", text}`. */
export const ChatCompletionContentPartTextParam = z.looseObject({
  type: z.literal('text'),
  text: z.string(),
});
export type ChatCompletionContentPartTextParam = z.infer<typeof ChatCompletionContentPartTextParam>;

/** A refusal content part of an assistant message. */
export const ChatCompletionContentPartRefusalParam = z.looseObject({
  type: z.literal('refusal'),
  refusal: z.string(),
});
export type ChatCompletionContentPartRefusalParam = z.infer<typeof ChatCompletionContentPartRefusalParam>;

/** The `image_url` of an image content part. */
export const ImageURL = z.looseObject({
  url: z.string(),
  detail: z.enum(['auto', 'low', 'high']).optional(),
});
export type ImageURL = z.infer<typeof ImageURL>;

/** An image content part. */
export const ChatCompletionContentPartImageParam = z.looseObject({
  type: z.literal('image_url'),
  image_url: ImageURL,
});
export type ChatCompletionContentPartImageParam = z.infer<typeof ChatCompletionContentPartImageParam>;

/** Base64 audio of an input-audio content part. */
export const InputAudio = z.looseObject({
  data: z.string(),
  format: z.enum(['wav', 'mp3']),
});
export type InputAudio = z.infer<typeof InputAudio>;

/** An input-audio content part. */
export const ChatCompletionContentPartInputAudioParam = z.looseObject({
  type: z.literal('input_audio'),
  input_audio: InputAudio,
});
export type ChatCompletionContentPartInputAudioParam = z.infer<typeof ChatCompletionContentPartInputAudioParam>;

/** The `file` of a file content part (all fields optional). */
export const FileFile = z.looseObject({
  file_data: z.string().optional(),
  file_id: z.string().optional(),
  filename: z.string().optional(),
});
export type FileFile = z.infer<typeof FileFile>;

/**
 * A file content part. The contract names it `File`, which would shadow the global `File`; the name
 * here follows its siblings (`ChatCompletionContentPartTextParam`, ...).
 */
export const ChatCompletionContentPartFileParam = z.looseObject({
  type: z.literal('file'),
  file: FileFile,
});
export type ChatCompletionContentPartFileParam = z.infer<typeof ChatCompletionContentPartFileParam>;

/** Any content part a user message may carry. */
export const ChatCompletionContentPart = z.discriminatedUnion('type', [
  ChatCompletionContentPartTextParam,
  ChatCompletionContentPartImageParam,
  ChatCompletionContentPartInputAudioParam,
  ChatCompletionContentPartFileParam,
]);
export type ChatCompletionContentPart = z.infer<typeof ChatCompletionContentPart>;

/**
 * A function call: the function a model called inside a function tool call, and the deprecated
 * `function_call` field. The contract's `Function` component is this same shape (not exported
 * under that name, which would shadow the global `Function`).
 */
export const FunctionCall = z.looseObject({
  name: z.string(),
  arguments: z.string(),
});
export type FunctionCall = z.infer<typeof FunctionCall>;

/** The custom tool a model called: free-form `input` text. */
export const Custom = z.looseObject({
  name: z.string(),
  input: z.string(),
});
export type Custom = z.infer<typeof Custom>;

/** A call to a function tool, as the model returns it and as it is sent back. */
export const ChatCompletionMessageFunctionToolCall = z.looseObject({
  id: z.string(),
  type: z.literal('function'),
  function: FunctionCall,
});
export type ChatCompletionMessageFunctionToolCall = z.infer<typeof ChatCompletionMessageFunctionToolCall>;

/** A call to a custom tool. */
export const ChatCompletionMessageCustomToolCall = z.looseObject({
  id: z.string(),
  type: z.literal('custom'),
  custom: Custom,
});
export type ChatCompletionMessageCustomToolCall = z.infer<typeof ChatCompletionMessageCustomToolCall>;

/** A tool call of either kind, discriminated by `type`. */
export const ChatCompletionMessageToolCall = z.discriminatedUnion('type', [
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageCustomToolCall,
]);
export type ChatCompletionMessageToolCall = z.infer<typeof ChatCompletionMessageToolCall>;

/** Request-side spellings of the tool calls (same shape). */
export const ChatCompletionMessageFunctionToolCallParam = ChatCompletionMessageFunctionToolCall;
export type ChatCompletionMessageFunctionToolCallParam = ChatCompletionMessageFunctionToolCall;
/** Request-side spelling of a custom tool call (same shape). */
export const ChatCompletionMessageCustomToolCallParam = ChatCompletionMessageCustomToolCall;
export type ChatCompletionMessageCustomToolCallParam = ChatCompletionMessageCustomToolCall;

/** A function's name, description and JSON-schema parameters. */
export const FunctionDefinition = z.looseObject({
  name: z.string(),
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  strict: z.boolean().nullable().optional(),
});
export type FunctionDefinition = z.infer<typeof FunctionDefinition>;

/** A function tool offered to the model. */
export const ChatCompletionFunctionToolParam = z.looseObject({
  type: z.literal('function'),
  function: FunctionDefinition,
});
export type ChatCompletionFunctionToolParam = z.infer<typeof ChatCompletionFunctionToolParam>;

/** A custom (free-form input) tool offered to the model in a chat-completions request. */
export const ChatCompletionCustomToolParam = z.looseObject({
  type: z.literal('custom'),
  custom: z.looseObject({
    name: z.string(),
    description: z.string().optional(),
    /** `{type: 'text'}` or `{type: 'grammar', grammar: {syntax, definition}}`. */
    format: z.looseObject({ type: z.string() }).optional(),
  }),
});
export type ChatCompletionCustomToolParam = z.infer<typeof ChatCompletionCustomToolParam>;

/** Any tool a chat-completions request may offer. */
export const ChatCompletionToolParam = z.discriminatedUnion('type', [
  ChatCompletionFunctionToolParam,
  ChatCompletionCustomToolParam,
]);
export type ChatCompletionToolParam = z.infer<typeof ChatCompletionToolParam>;

const textContent = z.union([z.string(), z.array(ChatCompletionContentPartTextParam)]);

/** Instructions from the developer (replaces `system` for newer models). */
export const ChatCompletionDeveloperMessageParam = z.looseObject({
  role: z.literal('developer'),
  content: textContent,
  name: z.string().optional(),
});
export type ChatCompletionDeveloperMessageParam = z.infer<typeof ChatCompletionDeveloperMessageParam>;

/** A system prompt. */
export const ChatCompletionSystemMessageParam = z.looseObject({
  role: z.literal('system'),
  content: textContent,
  name: z.string().optional(),
});
export type ChatCompletionSystemMessageParam = z.infer<typeof ChatCompletionSystemMessageParam>;

/** A user message: a string or an array of text, image, audio and file parts. */
export const ChatCompletionUserMessageParam = z.looseObject({
  role: z.literal('user'),
  content: z.union([z.string(), z.array(ChatCompletionContentPart)]),
  name: z.string().optional(),
});
export type ChatCompletionUserMessageParam = z.infer<typeof ChatCompletionUserMessageParam>;

/**
 * A reference to an earlier audio response of the model (`{id}`), the `audio` of an assistant
 * message. The contract names it `Audio`, which would shadow the global `Audio`.
 */
export const AudioReference = z.looseObject({ id: z.string() });
export type AudioReference = z.infer<typeof AudioReference>;

/**
 * An assistant message sent as context. It is not trainable: only `Choice` items in a trajectory
 * are trained on.
 */
export const ChatCompletionAssistantMessageParam = z.looseObject({
  role: z.literal('assistant'),
  content: z
    .union([
      z.string(),
      z.array(
        z.discriminatedUnion('type', [ChatCompletionContentPartTextParam, ChatCompletionContentPartRefusalParam]),
      ),
    ])
    .nullable()
    .optional(),
  audio: AudioReference.nullable().optional(),
  function_call: FunctionCall.nullable().optional(),
  name: z.string().optional(),
  refusal: z.string().nullable().optional(),
  // Not nullable: both documents say so (a response message's `tool_calls` is; see `ChatCompletionMessage`).
  tool_calls: z.array(ChatCompletionMessageToolCall).optional(),
});
export type ChatCompletionAssistantMessageParam = z.infer<typeof ChatCompletionAssistantMessageParam>;

/** The result of a tool call, sent back to the model. */
export const ChatCompletionToolMessageParam = z.looseObject({
  role: z.literal('tool'),
  content: textContent,
  tool_call_id: z.string(),
});
export type ChatCompletionToolMessageParam = z.infer<typeof ChatCompletionToolMessageParam>;

/** The result of a (deprecated) function call. */
export const ChatCompletionFunctionMessageParam = z.looseObject({
  role: z.literal('function'),
  content: z.string().nullable(),
  name: z.string(),
});
export type ChatCompletionFunctionMessageParam = z.infer<typeof ChatCompletionFunctionMessageParam>;

/** Any message param, discriminated by `role`. */
export const ChatCompletionMessageParam = z.discriminatedUnion('role', [
  ChatCompletionDeveloperMessageParam,
  ChatCompletionSystemMessageParam,
  ChatCompletionUserMessageParam,
  ChatCompletionAssistantMessageParam,
  ChatCompletionToolMessageParam,
  ChatCompletionFunctionMessageParam,
]);
export type ChatCompletionMessageParam = z.infer<typeof ChatCompletionMessageParam>;
