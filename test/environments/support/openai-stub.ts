/**
 * An OpenAI-compatible chat completions server of our own on 127.0.0.1 (node:http), answering as
 * api.openai.com does but never with logprobs, whatever the request asks: what `policyloop eval
 * --base-url` must work against. It answers `a<i>` to a last user message `q<i>`.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A request the stub received. */
export interface StubRequest {
  readonly authorization: string | undefined;
  readonly body: { model: string; messages: { role: string; content: string }[]; [key: string]: unknown };
}

/** The running stub. */
export interface OpenAIStub {
  /** Its base URL (ends in `/v1`). */
  readonly baseURL: string;
  readonly requests: StubRequest[];
  /** Milliseconds each answer waits. */
  delay: number;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  let text = '';
  for await (const chunk of request) text += String(chunk);
  return text;
}

/** Starts the stub on a free loopback port. */
export async function startOpenAIStub(): Promise<OpenAIStub> {
  const requests: StubRequest[] = [];
  const stub = { delay: 0 } as { delay: number };
  let counter = 0;
  const server: Server = createServer((request, response) => {
    void (async () => {
      const text = await readBody(request);
      if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
        response.writeHead(404, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            error: { message: `Unknown request URL: ${request.method} ${request.url}`, type: 'invalid_request_error' },
          }),
        );
        return;
      }
      const body = JSON.parse(text) as StubRequest['body'];
      requests.push({ authorization: request.headers.authorization, body });
      if (stub.delay > 0) await new Promise((resolve) => setTimeout(resolve, stub.delay));
      const last = body.messages.at(-1)?.content ?? '';
      counter += 1;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id: `chatcmpl-stub${counter}`,
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: String(last).replace(/^q/, 'a'), refusal: null, annotations: [] },
              logprobs: null,
              finish_reason: 'stop',
            },
          ],
          usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
          system_fingerprint: 'fp_stub',
        }),
      );
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return Object.assign(stub, {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  }) as OpenAIStub;
}
