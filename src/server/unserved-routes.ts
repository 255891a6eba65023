/**
 * The OpenAI routes the local service does not serve (`/v1/responses`, `/v1/completions`, ...):
 * their 404 says that the service speaks chat completions, that policyloop's recording fetch
 * translates the Responses API on the caller's side, and names, per framework, the setting that
 * keeps it on chat completions.
 */

/** OpenAI API families under `/v1/` that the service does not implement. */
const UNSERVED = [
  'responses',
  'completions',
  'embeddings',
  'assistants',
  'threads',
  'conversations',
  'realtime',
  'audio',
  'images',
  'moderations',
  'batches',
  'vector_stores',
  'uploads',
  'fine_tuning',
  'containers',
];
const PATTERN = new RegExp(`^/v1/(${UNSERVED.join('|')})(/|$)`);

/** What keeps each framework on chat completions (the same list as docs/integrations.md). */
export const CHAT_COMPLETIONS_SETTINGS =
  'OpenAI Agents SDK: a Runner with `model: new OpenAIChatCompletionsModel(client, name)`, or `setOpenAIAPI("chat_completions")`; ' +
  'AI SDK and Mastra: `provider.chat(name)` (not `provider(name)` or `provider.responses(name)`); ' +
  'LangChain: `new ChatOpenAICompletions({...})`, or `ChatOpenAI` with `useResponsesApi: false` and no `reasoning.summary`, built-in tools or Responses-only options; ' +
  'openai SDK: `client.chat.completions.create` (not `client.responses.create`)';

/**
 * The 404 message for `method path` when it is an OpenAI route the service does not serve, else
 * undefined (an ordinary 404).
 * @example
 * unservedRouteMessage('POST', '/v1/responses'); // 'POST /v1/responses is not served: ...'
 */
export function unservedRouteMessage(method: string, path: string): string | undefined {
  if (!PATTERN.test(path)) return undefined;
  return (
    `${method} ${path} is not served: this service speaks the OpenAI Chat Completions API only ` +
    `(POST /v1/chat/completions, GET /v1/models). policyloop's model.fetch(), model.openai() and captureFetch ` +
    "translate the Responses API and Anthropic's Messages API into chat completions on the caller's side: give " +
    `your framework one of them; or keep it on chat completions: ${CHAT_COMPLETIONS_SETTINGS}. ` +
    'See docs/integrations.md.'
  );
}
