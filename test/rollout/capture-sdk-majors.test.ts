/**
 * Capture with both majors of the `openai` SDK the peer range allows (6 and 7, the latter installed
 * as the `openai-v7` alias), against the real local service on loopback: the same scenarios run
 * for each. Capture keeps `.withResponse()` working through the SDK's private `_thenUnwrap`, so
 * this is where a major that changes it shows up.
 *
 * openai 7 declares `engines.node >= 22`, but everything capture uses of it (the client, its
 * APIPromise and its Stream) runs on Node 20, which this package supports: these cases run on
 * Node 20 too, so an openai 7 release that stops working there fails here instead of in a user's
 * rollout.
 */
import OpenAI6 from 'openai';
import OpenAI7 from 'openai-v7';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureCompletions, recordTrajectory } from 'policyloop';
import type { ChatCompletionsClient } from 'policyloop';
import { isChoice, Trajectory } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import { startTestService, type TestService } from 'policyloop/testing';

let service: TestService;

beforeAll(async () => {
  service = await startTestService();
});

afterAll(async () => {
  await service?.close();
});

/** The JSON bodies of the chat-completion requests that went on the wire, in order. */
interface WireLog {
  readonly fetch: typeof globalThis.fetch;
  readonly bodies: Record<string, unknown>[];
}

function recordingFetch(): WireLog {
  const bodies: Record<string, unknown>[] = [];
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url.endsWith('/chat/completions') && typeof init?.body === 'string') bodies.push(JSON.parse(init.body));
    return globalThis.fetch(input, init);
  };
  return { fetch, bodies };
}

/** The majors the peer range allows; the cast gives both the same (openai 6) request types. */
const majors = [
  { name: 'openai 6', OpenAI: OpenAI6 },
  { name: 'openai 7', OpenAI: OpenAI7 as unknown as typeof OpenAI6 },
];

// An openai 7 client is a ChatCompletionsClient as it is (tsc checks this line, not the cast above).
const v7IsAClient: OpenAI7 extends ChatCompletionsClient ? true : false = true;
expect(v7IsAClient).toBe(true);

function choicesOf(trajectory: unknown): Choice[] {
  return Trajectory.parse(trajectory).messages_and_choices.filter(isChoice);
}

function userTexts(trajectory: unknown): string[] {
  return Trajectory.parse(trajectory)
    .messages_and_choices.filter((item) => !isChoice(item) && item.role === 'user')
    .map((item) => String((item as { content: unknown }).content));
}

describe.each(majors)('capture with $name', ({ OpenAI }) => {
  const client = (wire: WireLog = recordingFetch()) =>
    captureCompletions(
      new OpenAI({ baseURL: service.baseURL, apiKey: service.apiKey, maxRetries: 0, fetch: wire.fetch }),
      {
        defaults: { model: service.baseModel, logprobs: true, max_tokens: 6 },
      },
    );

  it('records a non-streaming completion with its logprobs, and applies the defaults on the wire', async () => {
    const wire = recordingFetch();
    const captured = client(wire);
    const { result, trajectory } = await recordTrajectory(async () => {
      const completion = await captured.chat.completions.create({
        model: '',
        messages: [{ role: 'user', content: 'hi' }],
      });
      return completion.choices[0]?.message.content;
    });
    expect(wire.bodies).toEqual([
      { model: service.baseModel, logprobs: true, max_tokens: 6, messages: [{ role: 'user', content: 'hi' }] },
    ]);
    const choices = choicesOf(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content).toBe(result);
    expect(choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
  });

  it('keeps .withResponse() working and records the completion', async () => {
    const captured = client();
    const { result, trajectory } = await recordTrajectory(async () => {
      const { data, response } = await captured.chat.completions
        .create({ model: service.baseModel, messages: [{ role: 'user', content: 'with response' }] })
        .withResponse();
      return { status: response.status, content: data.choices[0]?.message.content };
    });
    expect(result.status).toBe(200);
    const choices = choicesOf(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content).toBe(result.content);
  });

  it('returns the SDK promise itself: .asResponse() gives the unread raw body and records nothing', async () => {
    const captured = client();
    const { result, trajectory } = await recordTrajectory(async () => {
      const response = await captured.chat.completions
        .create({ model: service.baseModel, messages: [{ role: 'user', content: 'raw please' }] })
        .asResponse();
      return (await response.json()) as { choices: Choice[] };
    });
    expect(result.choices[0]?.message.role).toBe('assistant');
    expect(choicesOf(trajectory)).toHaveLength(0);
  });

  it('records once when the caller both awaits the promise and asks it .withResponse()', async () => {
    const captured = client();
    const { result, trajectory } = await recordTrajectory(async () => {
      const pending = captured.chat.completions.create({
        model: service.baseModel,
        messages: [{ role: 'user', content: 'twice' }],
      });
      const awaited = await pending;
      const { data } = await pending.withResponse();
      return { same: data === awaited, content: awaited.choices[0]?.message.content };
    });
    expect(result.same).toBe(true);
    const choices = choicesOf(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content).toBe(result.content);
  });

  it('records a stream read to the end, with the logprobs of every chunk', async () => {
    const captured = client();
    const { result, trajectory } = await recordTrajectory(async () => {
      const stream = await captured.chat.completions.create({
        model: service.baseModel,
        messages: [{ role: 'user', content: 'stream please' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let tokens = 0;
      let usage = false;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        tokens += chunk.choices[0]?.logprobs?.content?.length ?? 0;
        if (chunk.usage) usage = true;
      }
      return { text, tokens, usage };
    });
    expect(result.usage).toBe(true);
    const choices = choicesOf(trajectory);
    expect(choices).toHaveLength(1);
    expect(choices[0]?.message.content ?? '').toBe(result.text);
    expect(result.tokens).toBeGreaterThan(0);
    expect(choices[0]?.logprobs?.content).toHaveLength(result.tokens);
  });

  it('keeps 8 concurrent rollouts on one client apart', async () => {
    const captured = client();
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        recordTrajectory(async () => {
          const messages: OpenAI6.ChatCompletionMessageParam[] = [{ role: 'user', content: `rollout ${index}` }];
          const first = await captured.chat.completions.create({ model: service.baseModel, messages });
          const reply = first.choices[0]?.message;
          if (reply === undefined) throw new Error('no choice');
          messages.push(reply, { role: 'user', content: `again ${index}` });
          const second = await captured.chat.completions.create({ model: service.baseModel, messages });
          return [reply.content, second.choices[0]?.message.content];
        }),
      ),
    );
    for (const [index, { result, trajectory }] of runs.entries()) {
      expect(userTexts(trajectory)).toEqual([`rollout ${index}`, `again ${index}`]);
      expect(choicesOf(trajectory).map((choice) => choice.message.content)).toEqual(result);
      expect(Trajectory.parse(trajectory).additional_histories).toEqual([]);
    }
  });

  it('records 8 concurrent streams left just after the finish_reason chunk, each in its own trajectory', async () => {
    const captured = client();
    const runs = await Promise.all(
      Array.from({ length: 8 }, (_, index) =>
        recordTrajectory(async () => {
          const stream = await captured.chat.completions.create({
            model: service.baseModel,
            messages: [{ role: 'user', content: `stream ${index}` }],
            stream: true,
            stream_options: { include_usage: true },
          });
          let text = '';
          let finishReason: string | null = null;
          // As the OpenAI Agents SDK does: stop reading once a choice says it is finished.
          for await (const chunk of stream) {
            text += chunk.choices[0]?.delta.content ?? '';
            finishReason = chunk.choices[0]?.finish_reason ?? null;
            if (finishReason !== null) break;
          }
          return { text, finishReason };
        }),
      ),
    );
    for (const [index, { result, trajectory }] of runs.entries()) {
      expect(result.finishReason).not.toBeNull();
      expect(userTexts(trajectory)).toEqual([`stream ${index}`]);
      const choices = choicesOf(trajectory);
      expect(choices).toHaveLength(1);
      expect(choices[0]?.message.content ?? '').toBe(result.text);
      expect(choices[0]?.finish_reason).toBe(result.finishReason);
      expect(choices[0]?.logprobs?.content?.length).toBeGreaterThan(0);
    }
  });
});
