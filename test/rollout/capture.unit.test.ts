import { describe, expect, it } from 'vitest';
import { captureCompletions, captureInto, currentTrajectory, recordTrajectory } from 'policyloop';
import { TrajectoryRecorder } from 'policyloop/training';
import { isChoice, Trajectory } from 'policyloop';
import type { Choice } from 'policyloop/schema';
import type { ChatCompletionCreateBody } from 'policyloop/training';
import { makeChoice, scriptedChatClient } from 'policyloop/testing';

type Message = Record<string, unknown>;

/** What the `openai` SDK hands back as `choices[0].message`: the Choice's message with SDK extras. */
function sdkEcho(completion: unknown): Message {
  const choice = (completion as { choices: Choice[] }).choices[0] as Choice;
  return { ...choice.message, annotations: [] };
}

describe('captureCompletions', () => {
  it('records a multi-turn chat as messages and Choices, in order, without duplicating the echoed reply', async () => {
    const client = captureCompletions(scriptedChatClient(['Paris', 'About 2.1 million']));
    const { trajectory } = await recordTrajectory(async () => {
      const messages: Message[] = [
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: 'Capital of France?' },
      ];
      const first = await client.chat.completions.create({ model: 'm', messages });
      messages.push(sdkEcho(first), { role: 'user', content: 'Population?' });
      await client.chat.completions.create({ model: 'm', messages });
    });
    const parsed = Trajectory.parse(trajectory);
    const shape = parsed.messages_and_choices.map((item) =>
      isChoice(item) ? `choice:${item.message.content}` : `${item.role}:${String(item.content)}`,
    );
    expect(shape).toEqual([
      'system:Answer briefly.',
      'user:Capital of France?',
      'choice:Paris',
      'user:Population?',
      'choice:About 2.1 million',
    ]);
    const choices = parsed.messages_and_choices.filter(isChoice);
    expect(choices.every((choice) => (choice.logprobs?.content?.length ?? 0) > 0)).toBe(true);
    expect(parsed.additional_histories).toEqual([]);
  });

  it('records parallel tool calls, the tool results sent back as tool messages, and the tools offered', async () => {
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
      },
    ];
    const client = captureCompletions(
      scriptedChatClient([
        makeChoice(null, {
          toolCalls: [
            { id: 'call_a', name: 'get_weather', arguments: { city: 'Paris' } },
            { id: 'call_b', name: 'get_weather', arguments: { city: 'Oslo' } },
          ],
        }),
        'Paris is warmer.',
      ]),
    );
    const { trajectory } = await recordTrajectory(async () => {
      const messages: Message[] = [{ role: 'user', content: 'Warmer: Paris or Oslo?' }];
      const first = await client.chat.completions.create({ model: 'm', messages, tools });
      // Echo written by hand (no SDK extras, content omitted): still the same turn as the Choice.
      const echo = sdkEcho(first);
      messages.push(
        { role: 'assistant', tool_calls: echo['tool_calls'] },
        { role: 'tool', tool_call_id: 'call_a', content: '21C' },
        { role: 'tool', tool_call_id: 'call_b', content: '9C' },
      );
      await client.chat.completions.create({ model: 'm', messages, tools });
    });
    const parsed = Trajectory.parse(trajectory);
    const items = parsed.messages_and_choices;
    expect(items.map((item) => (isChoice(item) ? 'choice' : item.role))).toEqual([
      'user',
      'choice',
      'tool',
      'tool',
      'choice',
    ]);
    const call = items[1] as Choice;
    expect(call.message.tool_calls?.map((toolCall) => toolCall.id)).toEqual(['call_a', 'call_b']);
    expect(items[2]).toMatchObject({ role: 'tool', tool_call_id: 'call_a', content: '21C' });
    expect(items[3]).toMatchObject({ role: 'tool', tool_call_id: 'call_b', content: '9C' });
    expect(parsed.tools).toEqual(tools);
  });

  it('puts a conversation that does not continue the main one (a sub-agent) in additional_histories', async () => {
    const client = captureCompletions(scriptedChatClient(['plan: search', 'found it', 'done']));
    const { trajectory } = await recordTrajectory(async () => {
      const main: Message[] = [{ role: 'user', content: 'task' }];
      const plan = await client.chat.completions.create({ model: 'm', messages: main });
      await client.chat.completions.create({
        model: 'm',
        messages: [
          { role: 'system', content: 'You are a searcher.' },
          { role: 'user', content: 'search' },
        ],
      });
      main.push(sdkEcho(plan), { role: 'user', content: 'result: found it' });
      await client.chat.completions.create({ model: 'm', messages: main });
    });
    const parsed = Trajectory.parse(trajectory);
    expect(parsed.messages_and_choices.filter(isChoice).map((choice) => choice.message.content)).toEqual([
      'plan: search',
      'done',
    ]);
    expect(parsed.additional_histories).toHaveLength(1);
    const history = parsed.additional_histories[0];
    expect(history?.messages_and_choices.map((item) => (isChoice(item) ? item.message.content : item.role))).toEqual([
      'system',
      'user',
      'found it',
    ]);
  });

  it('keeps concurrent rollouts that share one client in their own trajectories', async () => {
    // Interleaved for certain: rollout a's first reply waits until rollout b has sent its second request.
    let bRequests = 0;
    let bAskedTwice = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      bAskedTwice = resolve;
    });
    const interleavedEcho = async (request: { body: { messages: readonly unknown[] } }): Promise<string> => {
      const last = request.body.messages[request.body.messages.length - 1] as { content: string };
      if (last.content === 'b' && ++bRequests === 2) bAskedTwice();
      if (last.content === 'a') await gate;
      return `reply to ${last.content}`;
    };
    const client = captureCompletions(scriptedChatClient([interleavedEcho], { loop: true }));
    const run = (text: string) =>
      recordTrajectory(async () => {
        const messages: Message[] = [{ role: 'user', content: text }];
        const first = await client.chat.completions.create({ model: 'm', messages });
        messages.push(sdkEcho(first), { role: 'user', content: text });
        await client.chat.completions.create({ model: 'm', messages });
      });
    const [a, b] = await Promise.all([run('a'), run('b')]);
    const contents = (trajectory: unknown) =>
      Trajectory.parse(trajectory).messages_and_choices.map((item) =>
        isChoice(item) ? item.message.content : item.content,
      );
    expect(contents(a.trajectory)).toEqual(['a', 'reply to a', 'a', 'reply to a']);
    expect(contents(b.trajectory)).toEqual(['b', 'reply to b', 'b', 'reply to b']);
  });

  it('fills default request params into each request, the request values winning', async () => {
    const scripted = scriptedChatClient(['x', 'y']);
    const client = captureCompletions(scripted, { defaults: { logprobs: true, temperature: 1 } });
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] });
    await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], temperature: 0 });
    expect(scripted.requests[0]?.body).toMatchObject({ logprobs: true, temperature: 1 });
    expect(scripted.requests[1]?.body).toMatchObject({ logprobs: true, temperature: 0 });
  });

  it('outside a rollout passes calls through and records nothing', async () => {
    const client = captureCompletions(scriptedChatClient(['hello']));
    const response = (await client.chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi' }],
    })) as { choices: Choice[] };
    expect(response.choices[0]?.message.content).toBe('hello');
  });

  it('gives requests the rollout signal when they carry none', async () => {
    const scripted = scriptedChatClient(['a']);
    const client = captureCompletions(scripted);
    await recordTrajectory(
      () => client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
      {
        signal: new AbortController().signal,
      },
    );
    expect(scripted.requests[0]?.hasSignal).toBe(true);
  });

  it('records a streamed completion once it has been read to the end', async () => {
    const client = captureCompletions(
      scriptedChatClient([
        makeChoice('streamed answer'),
        makeChoice(null, { toolCalls: [{ name: 'f', arguments: { x: 1 } }] }),
      ]),
    );
    const { trajectory } = await recordTrajectory(async () => {
      const stream = (await client.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'go' }],
        stream: true,
      })) as AsyncIterable<unknown>;
      for await (const _chunk of stream) {
        // read to the end
      }
      const second = (await client.chat.completions.create({
        model: 'm',
        messages: [
          { role: 'user', content: 'go' },
          { role: 'assistant', content: 'streamed answer' },
          { role: 'user', content: 'again' },
        ],
        stream: true,
      })) as AsyncIterable<unknown>;
      for await (const _chunk of second) {
        // read to the end
      }
    });
    const choices = Trajectory.parse(trajectory).messages_and_choices.filter(isChoice);
    expect(choices).toHaveLength(2);
    expect(choices[0]?.message.content).toBe('streamed answer');
    expect(choices[0]?.logprobs?.content?.map((token) => token.token).join('')).toBe('streamed answer');
    expect(choices[1]?.message.tool_calls?.[0]).toMatchObject({
      type: 'function',
      function: { name: 'f', arguments: '{"x":1}' },
    });
    expect(choices[1]?.finish_reason).toBe('tool_calls');
  });

  it('records a stream once at its finish_reason chunk, and not a stream left before it', async () => {
    const client = captureCompletions(scriptedChatClient(['finished', 'left early']));
    const { trajectory } = await recordTrajectory(async () => {
      const read = async (content: string, stop: (chunk: { choices: { finish_reason?: unknown }[] }) => boolean) => {
        const stream = (await client.chat.completions.create({
          model: 'm',
          messages: [{ role: 'user', content }],
          stream: true,
        })) as AsyncIterable<{ choices: { finish_reason?: unknown }[] }>;
        for await (const chunk of stream) if (stop(chunk)) break;
      };
      // Stops right after the finish_reason chunk (as agent frameworks do): recorded.
      await read('one', (chunk) => typeof chunk.choices[0]?.finish_reason === 'string');
      // Stops at the first chunk, before any finish_reason: not recorded.
      await read('two', () => true);
    });
    const parsed = Trajectory.parse(trajectory);
    expect(parsed.messages_and_choices.filter(isChoice).map((choice) => choice.message.content)).toEqual(['finished']);
    expect(parsed.additional_histories).toEqual([]);
  });

  it('records the Choice before the caller resumes from its await', async () => {
    const choice = makeChoice('ok');
    const client = captureCompletions({
      chat: { completions: { create: (_body: ChatCompletionCreateBody) => Promise.resolve({ choices: [choice] }) } },
    });
    const { result } = await recordTrajectory(async () => {
      await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'a' }] });
      return ((currentTrajectory() as TrajectoryRecorder).toTrajectory().messages_and_choices ?? []).length;
    });
    expect(result).toBe(2);
  });

  it('records deep copies: later changes to the Choice or the messages do not show in the trajectory', () => {
    const recorder = new TrajectoryRecorder();
    const choice = makeChoice('four') as Choice & Record<string, unknown>;
    choice.logprobs = {
      content: [{ token: 'four', logprob: -0.5, bytes: [102, 111, 117, 114], top_logprobs: [] }],
      refusal: null,
    };
    const own = JSON.parse('{"__proto__": {"kept": true}, "list": [1, [2, {"deep": 3}]]}') as Record<string, unknown>;
    choice['extra'] = own;
    const message = { role: 'user' as const, content: 'What is 2+2?', metadata: { when: new Date(0) } };
    recorder.recordCompletion({ messages: [message], choice });
    (choice.logprobs?.content?.[0]?.bytes as number[])[0] = 0;
    choice.message.content = 'changed';
    ((own['list'] as unknown[])[1] as unknown[])[0] = 'changed';
    message.metadata.when.setTime(1);
    const [recordedMessage, recordedChoice] = recorder.toTrajectory().messages_and_choices as unknown as [
      typeof message,
      Choice & Record<string, unknown>,
    ];
    expect(recordedChoice.message.content).toBe('four');
    expect(recordedChoice.logprobs?.content?.[0]?.bytes).toEqual([102, 111, 117, 114]);
    const extra = recordedChoice['extra'] as Record<string, unknown>;
    expect(Object.hasOwn(extra, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(extra)).toBe(Object.prototype);
    expect(extra['list']).toEqual([1, [2, { deep: 3 }]]);
    expect(recordedMessage.metadata.when).toBeInstanceOf(Date);
    expect(recordedMessage.metadata.when.getTime()).toBe(0);
  });

  it('stops recording once the recorder is closed', async () => {
    const recorder = new TrajectoryRecorder();
    recorder.recordCompletion({ messages: [{ role: 'user', content: 'a' }], choice: makeChoice('b') });
    recorder.close();
    recorder.recordCompletion({ messages: [{ role: 'user', content: 'c' }], choice: makeChoice('d') });
    expect(recorder.toTrajectory().messages_and_choices).toHaveLength(2);
    expect(recorder.additionalHistories).toHaveLength(0);
  });

  it('continues the conversation when a framework drops an empty assistant turn from what it sends back', () => {
    const recorder = new TrajectoryRecorder();
    const system = { role: 'system' as const, content: 'Be brief.' };
    const question = { role: 'user' as const, content: 'Weather in Rome?' };
    // The model ended its turn at once: no text, no tool call (the AI SDK and the Agents SDK then
    // leave that assistant message out of the next request).
    recorder.recordCompletion({ messages: [system, question], choice: makeChoice('') });
    // The Agents SDK asks again in the same run; the AI SDK sends the follow-up question.
    recorder.recordCompletion({ messages: [system, question], choice: makeChoice('Sunny.') });
    const followUp = { role: 'user' as const, content: 'And tomorrow?' };
    const echoed = { role: 'assistant' as const, content: 'Sunny.' };
    recorder.recordCompletion({ messages: [system, question, echoed, followUp], choice: makeChoice('Rain.') });
    const trajectory = Trajectory.parse(recorder.toTrajectory());
    expect(trajectory.additional_histories).toEqual([]);
    expect(
      trajectory.messages_and_choices.map((item) => (isChoice(item) ? `choice:${item.message.content}` : item.content)),
    ).toEqual(['Be brief.', 'Weather in Rome?', 'choice:', 'choice:Sunny.', 'And tomorrow?', 'choice:Rain.']);
    // A turn with text that the request leaves out is not skipped: that request starts a new history.
    recorder.recordCompletion({ messages: [system, question, followUp], choice: makeChoice('Snow.') });
    expect(recorder.additionalHistories).toHaveLength(1);
  });

  it('records each completion once when a captured client is wrapped again', async () => {
    const scripted = scriptedChatClient(['one']);
    const inner = captureCompletions(scripted, { defaults: { logprobs: true } });
    const twice = captureCompletions(inner, { defaults: () => ({ temperature: 0.5 }) });
    const { trajectory } = await recordTrajectory(() =>
      twice.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    );
    expect(Trajectory.parse(trajectory).messages_and_choices).toHaveLength(2);
    expect(Trajectory.parse(trajectory).additional_histories).toEqual([]);
    expect(scripted.requests[0]?.body).toMatchObject({ logprobs: true, temperature: 0.5 });
  });

  it('records a sub-agent that speaks first into its own history with captureInto', async () => {
    const client = captureCompletions(scriptedChatClient(['plan: add', 'sum is 4']));
    const { trajectory } = await recordTrajectory(async (recorder) => {
      await captureInto(recorder.addHistory(), () =>
        client.chat.completions.create({
          model: 'm',
          messages: [
            { role: 'system', content: 'You plan.' },
            { role: 'user', content: '2+2' },
          ],
        }),
      );
      await client.chat.completions.create({
        model: 'm',
        messages: [{ role: 'user', content: 'plan: add. Solve 2+2' }],
      });
    });
    const parsed = Trajectory.parse(trajectory);
    expect(parsed.messages_and_choices.filter(isChoice).map((choice) => choice.message.content)).toEqual(['sum is 4']);
    expect(
      parsed.additional_histories[0]?.messages_and_choices.filter(isChoice).map((choice) => choice.message.content),
    ).toEqual(['plan: add']);
    expect(() => captureInto(new TrajectoryRecorder(), () => 1)).toThrow('captureInto was called outside a rollout');
  });
});

describe('the rollout scope between rollouts', () => {
  it('keeps recording in rollouts still running when an overlapping one ends, and is gone outside all of them', async () => {
    const client = captureCompletions(scriptedChatClient(['a1', 'b1', 'b2', 'c1']));
    const ask = (content: string) =>
      client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content }] });
    let releaseB: () => void = () => undefined;
    const bWaits = new Promise<void>((resolve) => {
      releaseB = resolve;
    });
    const b = recordTrajectory(async () => {
      await ask('b');
      await bWaits; // still running after `a` ended
      await ask('b again');
    });
    const a = await recordTrajectory(async () => {
      await ask('a');
    });
    expect(currentTrajectory()).toBeUndefined();
    releaseB();
    const { trajectory } = await b;
    const contents = (value: typeof trajectory) =>
      [value, ...(value.additional_histories ?? [])]
        .flatMap((history) => history.messages_and_choices ?? [])
        .filter(isChoice)
        .map((choice) => choice.message.content);
    // The scripted client answers in call order: b asked first, then a, then b again.
    expect(contents(a.trajectory)).toEqual(['b1']);
    expect(contents(trajectory)).toEqual(['a1', 'b2']);
    expect(currentTrajectory()).toBeUndefined();
    // A rollout after all of them ended records again.
    const c = await recordTrajectory(async () => {
      expect(currentTrajectory()).toBeInstanceOf(TrajectoryRecorder);
      await ask('c');
    });
    expect(contents(c.trajectory)).toEqual(['c1']);
  });
});
