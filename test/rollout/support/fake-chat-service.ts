/**
 * A chat-completions stand-in for the translation tests: a `fetch` that answers each
 * `POST …/chat/completions` with the next scripted Choice (JSON, or SSE chunks when the body asks
 * to stream), keeps every body and URL it was sent, and can answer with an error status.
 */
import type { Choice } from 'policyloop/schema';

/** What the stand-in was sent, and its `fetch`. */
export interface FakeChatService {
  readonly fetch: typeof globalThis.fetch;
  /** The JSON bodies it received, in order. */
  readonly bodies: Record<string, unknown>[];
  /** The URLs it received, in order. */
  readonly urls: string[];
  /** The headers it received, in order. */
  readonly headers: Headers[];
}

/** SSE chunks of `choice`: reasoning, then text token by token, then tool calls, finish, usage. */
function chunksOf(choice: Choice): unknown[] {
  const message = choice.message as unknown as Record<string, unknown>;
  const tokens = choice.logprobs?.content ?? [];
  const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'fake-model' };
  const chunks: unknown[] = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
  ];
  if (typeof message['reasoning_content'] === 'string')
    chunks.push({
      ...base,
      choices: [{ index: 0, delta: { reasoning_content: message['reasoning_content'] }, finish_reason: null }],
    });
  // The text in two pieces, the token logprobs with the first (they may also cover a call's markup).
  const content = choice.message.content ?? '';
  const half = Math.ceil(content.length / 2);
  for (const [index, piece] of [content.slice(0, half), content.slice(half)].entries()) {
    if (piece === '' && !(index === 0 && tokens.length > 0)) continue;
    chunks.push({
      ...base,
      choices: [
        {
          index: 0,
          delta: { content: piece },
          logprobs: index === 0 ? { content: tokens } : null,
          finish_reason: null,
        },
      ],
    });
  }
  (choice.message.tool_calls ?? []).forEach((call, index) => {
    const {
      id,
      type,
      function: fn,
    } = call as { id: string; type: string; function: { name: string; arguments: string } };
    const half = Math.floor(fn.arguments.length / 2);
    chunks.push({
      ...base,
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [{ index, id, type, function: { name: fn.name, arguments: fn.arguments.slice(0, half) } }],
          },
          finish_reason: null,
        },
      ],
    });
    chunks.push({
      ...base,
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index, function: { arguments: fn.arguments.slice(half) } }] },
          finish_reason: null,
        },
      ],
    });
  });
  chunks.push({ ...base, choices: [{ index: 0, delta: {}, finish_reason: choice.finish_reason }] });
  chunks.push({ ...base, choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
  return chunks;
}

/**
 * A stand-in answering the calls with `choices` in turn (the last one repeated); `status` gives a
 * call's HTTP status (200 by default).
 */
export function fakeChatService(choices: readonly Choice[], status: readonly number[] = []): FakeChatService {
  const bodies: Record<string, unknown>[] = [];
  const urls: string[] = [];
  const headers: Headers[] = [];
  let call = 0;
  const fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
    urls.push(url);
    bodies.push(body);
    headers.push(new Headers(init?.headers));
    const code = status[call] ?? 200;
    const choice = choices[Math.min(call, choices.length - 1)] as Choice;
    call += 1;
    if (code !== 200)
      return Response.json({ error: { message: 'the service is busy', type: 'server_error' } }, { status: code });
    if (body['stream'] !== true) {
      return Response.json({
        id: 'chatcmpl-1',
        object: 'chat.completion',
        created: 1_700_000_000,
        model: 'fake-model',
        choices: [choice],
        usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
      });
    }
    const text = `${chunksOf(choice)
      .map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`)
      .join('')}data: [DONE]\n\n`;
    return new Response(text, { headers: { 'content-type': 'text/event-stream' } });
  };
  return { fetch: fetch as typeof globalThis.fetch, bodies, urls, headers };
}
