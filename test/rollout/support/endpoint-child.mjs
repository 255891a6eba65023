// An agent in another process, as written for OpenAI and Anthropic: it reads its base URLs and
// keys from the environment (`context.endpoint.env`) and names models of its own. It makes a chat
// completion, a streamed Responses call and a streamed Messages call about the word it is given,
// lists the models, and prints what it got as one JSON line.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const word = process.argv[2] ?? 'word';
const openai = new OpenAI({ maxRetries: 0, timeout: 60_000 });
const anthropic = new Anthropic({ maxRetries: 0, timeout: 60_000 });

const chat = await openai.chat.completions.create({
  model: 'gpt-4o',
  messages: [{ role: 'user', content: `Say ${word}.` }],
  max_tokens: 4,
});
const responses = await openai.responses
  .stream({ model: 'gpt-4o-mini', input: `Again ${word}.`, max_output_tokens: 4 })
  .finalResponse();
const message = await anthropic.messages
  .stream({ model: 'claude-sonnet-4-5', max_tokens: 4, messages: [{ role: 'user', content: `Once more ${word}.` }] })
  .finalMessage();
const models = await openai.models.list();
console.log(
  JSON.stringify({
    word,
    chat: chat.choices[0]?.finish_reason,
    responses: responses.status,
    messages: message.stop_reason,
    models: models.data.map((model) => model.id),
    wandbKey: process.env.WANDB_API_KEY ?? null,
  }),
);
