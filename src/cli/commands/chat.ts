/** `policyloop chat <model> "prompt"`: one chat completion from a model (a checkpoint with `--step`). */
import type { TrainingClient } from '../../client/index.js';
import { modelInferenceName } from '../../training/inference-name.js';
import { type CommonOptions, out, outJson, resolveModel } from '../context.js';
import { finiteNumber, nonNegativeInteger, positiveInteger } from './resources.js';

/** Options of `chat`. */
export interface ChatOptions extends CommonOptions {
  step?: string | undefined;
  maxTokens?: string | undefined;
  temperature?: string | undefined;
  system?: string | undefined;
}

/**
 * The reply to `prompt` from `reference`: a model id, `project/name`, or an inference name
 * (`wandb-artifact:///entity/project/name[:stepN]`, or any name the inference API lists).
 */
export async function chat(
  client: TrainingClient,
  reference: string,
  prompt: string,
  options: ChatOptions,
): Promise<number> {
  const step = options.step === undefined ? undefined : nonNegativeInteger('--step', options.step);
  const maxTokens = options.maxTokens === undefined ? undefined : positiveInteger('--max-tokens', options.maxTokens);
  const temperature =
    options.temperature === undefined ? undefined : finiteNumber('--temperature', options.temperature);
  let name = reference;
  if (!reference.includes(':')) {
    const model = await resolveModel(client, reference);
    name = modelInferenceName(model, step);
  } else if (step !== undefined) {
    name = `${reference.replace(/:step\d+$/, '')}:step${step}`;
  }
  const messages = [
    ...(options.system === undefined ? [] : [{ role: 'system', content: options.system }]),
    { role: 'user', content: prompt },
  ];
  // Chat completions, of base and trained models alike, are a route of the training API (the
  // inference API only lists models): the same host the other commands talk to.
  const response = await fetch(`${client.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${client.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: name,
      messages,
      max_tokens: maxTokens,
      temperature,
    }),
    signal: AbortSignal.timeout(client.timeout),
  });
  const body = (await response.json().catch(() => null)) as {
    choices?: { message?: { content?: unknown } }[] | undefined;
    detail?: unknown;
    error?: { message?: unknown } | undefined;
  } | null;
  if (!response.ok) {
    const detail = body?.error?.message ?? body?.detail;
    throw new Error(
      `chat completion of ${name} failed: ${typeof detail === 'string' ? detail : JSON.stringify(detail ?? response.statusText)} (HTTP ${response.status})`,
    );
  }
  if (options.json) outJson(body);
  else out(String(body?.choices?.[0]?.message?.content ?? ''));
  return 0;
}
