/** The name a trained model is called by in chat completions. */
import { integerOption } from '../internal/options.js';

/**
 * `wandb-artifact:///<entity>/<project>/<name>` (the latest step) or `...:step<N>` (a pinned step).
 * @example
 * modelInferenceName({ entity: 'me', project: 'demo', name: 'agent' }, 3); // 'wandb-artifact:///me/demo/agent:step3'
 */
export function modelInferenceName(model: { entity: string; project: string; name: string }, step?: number): string {
  const base = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;
  if (step === undefined) return base;
  integerOption('step', step, { min: 0 });
  return `${base}:step${step}`;
}
