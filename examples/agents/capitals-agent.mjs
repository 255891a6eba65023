// An agent that runs as a process of its own, written as for OpenAI: the `openai` package reads
// OPENAI_BASE_URL and OPENAI_API_KEY from the environment, and the agent names a model of its own.
// It scores its own reply and prints the score as its last line of JSON: that is how a reward
// computed in the child gets back to the training script (`context.endpoint.spawn()`'s `result`).
// Trained by examples/process-agent.ts, which hands it a rollout's endpoint in those variables.
// Run alone: OPENAI_BASE_URL=... OPENAI_API_KEY=... node examples/agents/capitals-agent.mjs cat
import OpenAI from 'openai';

const word = process.argv[2] ?? 'hello';
const client = new OpenAI({ maxRetries: 1, timeout: 60_000 });
const response = await client.responses.create({
  model: 'gpt-4o-mini', // the rollout's endpoint answers with the model being trained
  instructions: 'Answer in capital letters.',
  input: word,
  max_output_tokens: 8,
});
const reply = response.output_text;
// The reward: the share of the reply's characters that are capital letters A-Z.
const reward = reply.length === 0 ? 0 : (reply.match(/[A-Z]/g)?.length ?? 0) / reply.length;
console.log(JSON.stringify({ reply, reward }));
