/** Wire fixtures shared by the client tests. */
import type { TrajectoryGroupInput } from 'policyloop';

export const MODEL_ID = '6f1c2b9e-3a4d-4e5f-8a6b-7c8d9e0f1a2b';
export const JOB_ID = '0b6a1f52-9d3e-4c7a-b1e8-2f4d6a8c0e13';

export const modelResponse = {
  id: MODEL_ID,
  entity: 'team',
  project: 'demo',
  name: 'agent-001',
  base_model: 'Qwen/Qwen2.5-14B-Instruct',
  run_id: null,
};

/** A UUID whose last group is `n`, so tests can tell items apart. */
export function uuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString().padStart(12, '0')}`;
}

export const fullJob = {
  id: JOB_ID,
  model_id: MODEL_ID,
  status: 'RUNNING',
  progress: 0.5,
  error_message: null,
  training_start: '2026-01-01T00:00:01Z',
  training_end: null,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: '2026-01-01T00:00:02Z',
};

/** A trajectory group as real clients send it: a system message and a trainable choice. */
export const group: TrajectoryGroupInput = {
  trajectories: [
    {
      messages_and_choices: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        {
          finish_reason: 'stop',
          index: 0,
          message: { role: 'assistant', content: 'Hello' },
          logprobs: { content: [{ token: 'token_id:9906', logprob: -0.1, bytes: null, top_logprobs: [] }] },
        },
      ],
      reward: 1,
    },
  ],
};
