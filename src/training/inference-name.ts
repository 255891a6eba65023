/** The name a trained model is called by in chat completions. */
import { PolicyloopError } from '../internal/errors.js';

/**
 * `wandb-artifact:///<entity>/<project>/<name>` (the latest step) or `...:step<N>` (a pinned step).
 * @example
 * modelInferenceName({ entity: 'me', project: 'demo', name: 'agent' }, 3); // 'wandb-artifact:///me/demo/agent:step3'
 */
export function modelInferenceName(model: { entity: string; project: string; name: string }, step?: number): string {
  const base = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;
  if (step === undefined) return base;
  if (!Number.isInteger(step) || step < 0)
    throw new PolicyloopError(`Expected \`step\` to be an integer >= 0, got ${step}`);
  return `${base}:step${step}`;
}
