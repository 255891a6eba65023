/** The name a trained model is called by in chat completions. */
import { option, parseValue } from '../internal/option-schema.js';

// Made once: `inferenceName(step)` may be asked for on every rollout.
const Step = option.integer({ min: 0 });

/**
 * `wandb-artifact:///<entity>/<project>/<name>` (the latest step) or `...:step<N>` (a pinned step).
 * @example
 * modelInferenceName({ entity: 'me', project: 'demo', name: 'agent' }, 3); // 'wandb-artifact:///me/demo/agent:step3'
 */
export function modelInferenceName(model: { entity: string; project: string; name: string }, step?: number): string {
  const base = `wandb-artifact:///${model.entity}/${model.project}/${model.name}`;
  if (step === undefined) return base;
  parseValue('step', Step, step);
  return `${base}:step${step}`;
}
