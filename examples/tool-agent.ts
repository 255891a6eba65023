/**
 * A tool-using agent: the model may call `get_weather`; the rollout runs the tool, sends the result
 * back as a tool message, and asks again. Every completion is captured into the trajectory in
 * order, between the messages the rollout sent (user, Choice with the call, tool result, Choice
 * with the answer). The reward checks the tool call's arguments.
 * A fresh tiny model has never seen a tool call, so a short SFT warm start shows it the form; the
 * gather then samples real tool-calling conversations and one RL step trains on them (offline).
 * Run: npx tsx examples/tool-agent.ts
 */
import { rm } from 'node:fs/promises';
import type OpenAI from 'openai';
import {
  combineRewards,
  gatherTrajectoryGroups,
  isChoice,
  LocalBackend,
  toolCalledWith,
  TrainableModel,
} from 'policyloop';
import type { SFTRow } from 'policyloop';

interface Scenario {
  city: string;
}

// Short on purpose: the tiny local model reads at most 256 tokens (bytes), tools included.
const tools: OpenAI.ChatCompletionFunctionTool[] = [
  {
    type: 'function',
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
];
const weather: Record<string, string> = {
  Paris: '21C, clear',
  Lima: '18C, cloudy',
  Oslo: '9C, rain',
  Rome: '25C, sunny',
};
const scenarios: Scenario[] = Object.keys(weather).map((city) => ({ city }));
const ask = (city: string): OpenAI.ChatCompletionMessageParam => ({ role: 'user', content: `Weather in ${city}?` });

const dataDir = '.policyloop/tool-agent';
await rm(dataDir, { recursive: true, force: true }); // a fresh model every run
const backend = await LocalBackend.start({ dataDir });
const model = new TrainableModel({ project: 'examples', name: 'weather-agent', baseModel: 'policyloop/tiny-chat' });
await model.register(backend);
const client = model.openai();

// 1. SFT warm start: conversations that call the tool, then answer from its result.
const rows: SFTRow[] = scenarios.flatMap(({ city }) => {
  const call = {
    id: 'call_1',
    type: 'function' as const,
    function: { name: 'get_weather', arguments: JSON.stringify({ city }) },
  };
  const calling: OpenAI.ChatCompletionMessageParam[] = [
    ask(city),
    { role: 'assistant', content: null, tool_calls: [call] },
  ];
  const answering: OpenAI.ChatCompletionMessageParam[] = [
    ...calling,
    { role: 'tool', tool_call_id: 'call_1', content: weather[city] ?? '' },
    { role: 'assistant', content: `${weather[city]} in ${city}.` },
  ];
  return [
    { messages: calling, tools },
    { messages: answering, tools },
  ];
});
await model.trainSFT(Array.from({ length: 50 }, () => rows).flat(), { batchSize: 8, learningRate: 1e-2 });

// 2. The agent loop, captured: call the model, run the tools it calls, send the results back.
const groups = await gatherTrajectoryGroups(
  scenarios,
  async (scenario) => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [ask(scenario.city)];
    for (let turn = 0; turn < 3; turn += 1) {
      const completion = await client.chat.completions.create({
        model: model.inferenceName(),
        messages,
        tools,
        max_tokens: 64,
      });
      const message = completion.choices[0]?.message;
      if (message === undefined) break;
      messages.push(message);
      const calls = message.tool_calls ?? [];
      if (calls.length === 0) break;
      for (const call of calls) {
        const city =
          call.type === 'function' ? (JSON.parse(call.function.arguments) as { city?: string }).city : undefined;
        messages.push({ role: 'tool', tool_call_id: call.id, content: weather[city ?? ''] ?? 'unknown city' });
      }
    }
  },
  {
    groupSize: 4,
    reward: combineRewards<Scenario>({
      // The right city: the reward. Any call of the tool: a metric only (weight 0).
      right_city: toolCalledWith('get_weather', (args, scenario) => (args as { city?: string }).city === scenario.city),
      called_tool: { fn: toolCalledWith('get_weather'), weight: 0 },
    }),
    // A model may write a call that is not valid JSON: up to a quarter of the rollouts may fail
    // and are kept in group.exceptions.
    maxExceptions: 0.25,
    sampledStep: () => model.getStep(),
  },
);

for (const [index, group] of groups.entries()) {
  const shapes = group.trajectories.map((trajectory) =>
    trajectory.messages_and_choices.map((item) => (isChoice(item) ? 'choice' : item.role)).join(' > '),
  );
  const rewards = group.trajectories.map((trajectory) => trajectory.reward).join(' ');
  console.log(`${scenarios[index]?.city}: rewards ${rewards}; ${shapes[0]}; ${group.exceptions?.length ?? 0} failed`);
}
// 3. One RL step on the captured conversations (logprobs came with every Choice). A group whose
// rollouts all scored the same carries no gradient; when the warm start already got every city
// right there is nothing for RL to learn from this batch, and the step is skipped.
const learnable = groups.some((group) => new Set(group.trajectories.map((trajectory) => trajectory.reward)).size > 1);
const step = learnable ? (await model.train(groups)).step : await model.getStep();
if (!learnable) console.log('every group scored the same (the warm start got them all): no RL step this time');
console.log(`trained to step ${step}; history in ${model.files.history}`);
await model.close();
await backend.close();
