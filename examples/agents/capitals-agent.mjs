// An agent that runs as a process of its own, written as for OpenAI: the `openai` package reads
// OPENAI_BASE_URL and OPENAI_API_KEY from the environment, and the agent names a model of its own.
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
console.log(response.output_text);
