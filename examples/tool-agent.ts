/**
 * A tool-using agent: the model may call `get_weather`; the rollout runs the tool, sends the result
 * back as a tool message, and asks again. Every completion is captured into the trajectory in
 * order, between the messages the rollout sent. The reward checks the tool call's arguments.
 * Run: npx tsx examples/tool-agent.ts
 */
import type OpenAI from 'openai';
import { gatherTrajectoryGroups, LocalBackend, toolCalledWith, TrainableModel } from 'policyloop';

interface Scenario {
  city: string;
}

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

const backend = await LocalBackend.start({ dataDir: '.policyloop/tool-agent' });
const model = new TrainableModel({ project: 'examples', name: 'weather-agent', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai();

const groups = await gatherTrajectoryGroups(
  [{ city: 'Paris' }, { city: 'Lima' }] satisfies Scenario[],
  async (scenario) => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'user', content: `What is the weather in ${scenario.city}?` },
    ];
    for (let turn = 0; turn < 3; turn += 1) {
      const completion = await client.chat.completions.create({
        model: model.inferenceName(),
        messages,
        tools,
        max_tokens: 48,
      });
      const message = completion.choices[0]?.message;
      if (message === undefined) break;
      messages.push(message);
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) break;
      for (const call of calls) {
        messages.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature_c: 21, sky: 'clear' }) });
      }
    }
  },
  {
    groupSize: 4,
    reward: toolCalledWith<Scenario>('get_weather', (args, scenario) => (args as { city?: string }).city === scenario.city),
    maxExceptions: 0.25, // a quarter of the rollouts may fail and are kept in group.exceptions
    policyVersion: () => model.getStep(),
  },
);

for (const group of groups) {
  console.log(group.trajectories.map((t) => `reward ${t.reward}, ${t.messages_and_choices.length} items`).join('; '));
}
const { step } = await model.train(groups);
console.log(`trained to step ${step}`);
await model.close();
await backend.close();
