/**
 * Building blocks of the corpus, shaped exactly like what real clients send: the OpenAI Python
 * SDK's `model_dump()` of a `Choice` from a vLLM-backed service (every optional key present,
 * unset ones `null`, vLLM's extra keys, `token_id:<int>` tokens) and OpenPipe ART's trajectory,
 * group, log and training-job bodies.
 */

/** Ids as the service mints them. */
export const MODEL_ID = '3f2b6c1e-8d4a-4e7b-9c2f-1a5d6e7f8a9b';
export const JOB_ID = '0b9e8d7c-6f5a-4b3c-8d2e-1f0a9b8c7d6e';
export const CHECKPOINT_ID = 'c1a2b3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d';
export const EVENT_IDS = [
  '11111111-2222-4333-8444-555555555501',
  '11111111-2222-4333-8444-555555555502',
  '11111111-2222-4333-8444-555555555503',
] as const;

/** A function tool as ART passes it (`tools=` of the rollout). */
export const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city'],
      additionalProperties: false,
    },
    strict: null,
  },
};

/** Logprobs of a vLLM completion with `return_tokens_as_token_ids`, as `model_dump()` writes them. */
export const tokenIdLogprobs = {
  content: [
    {
      token: 'token_id:9707',
      bytes: [72, 101, 108, 108, 111],
      logprob: -0.0123,
      top_logprobs: [{ token: 'token_id:9707', bytes: [72, 101, 108, 108, 111], logprob: -0.0123 }],
    },
    { token: 'token_id:0', bytes: null, logprob: -1.5, top_logprobs: [] },
    { token: 'token_id:151645', bytes: [], logprob: -0.0001, top_logprobs: [] },
  ],
  refusal: null,
};

/** A text `Choice` exactly as `ChatCompletion.choices[0].model_dump()` returns it from vLLM. */
export const textChoice = {
  finish_reason: 'stop',
  index: 0,
  logprobs: tokenIdLogprobs,
  message: {
    content: 'It is sunny in Paris.',
    refusal: null,
    role: 'assistant',
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: [],
    reasoning_content: null,
  },
  stop_reason: null,
};

/** A `Choice` that calls a function tool and a custom tool. */
export const toolCallChoice = {
  finish_reason: 'tool_calls',
  index: 1,
  logprobs: { content: [{ token: 'token_id:42', bytes: null, logprob: -0.25, top_logprobs: [] }], refusal: null },
  message: {
    content: null,
    refusal: null,
    role: 'assistant',
    annotations: null,
    audio: null,
    function_call: null,
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_2', type: 'custom', custom: { name: 'python', input: 'print(1 + 1)' } },
    ],
  },
};

/** A `Choice` without logprobs (a client that did not ask for them). */
export const bareChoice = {
  finish_reason: 'length',
  index: 0,
  message: { role: 'assistant', content: 'Truncat' },
};

/** A conversation that mixes messages (context) with `Choice` items (trainable turns). */
export const mixedMessagesAndChoices = [
  { role: 'system', content: 'You are a weather bot.' },
  { role: 'user', content: 'Weather in Paris?' },
  toolCallChoice,
  { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
  { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '2' }] },
  textChoice,
];

/** An ART trajectory after `model_dump(mode="json")`: every field present, policy versions null. */
export const artTrajectory = {
  messages_and_choices: mixedMessagesAndChoices,
  tools: [weatherTool],
  additional_histories: [],
  reward: 0.75,
  initial_policy_version: null,
  final_policy_version: null,
  metrics: { correct: true, turns: 3, latency_s: 0.42 },
  metadata: { scenario_id: 'paris-1', difficulty: 2, split_seed: 0.5, verified: false, note: null },
  logs: ['called get_weather'],
};

/** A second ART trajectory of the same group, with a sub-agent history. */
export const artTrajectoryWithHistory = {
  ...artTrajectory,
  reward: 0.25,
  initial_policy_version: 3,
  final_policy_version: 4,
  additional_histories: [
    {
      messages_and_choices: [{ role: 'user', content: 'Summarise.' }, bareChoice],
      tools: null,
    },
  ],
};

/** ART's `TrajectoryGroup.model_dump()`: trajectories, failed rollouts, group metadata, metrics, logs. */
export const artGroup = {
  trajectories: [artTrajectory, artTrajectoryWithHistory],
  exceptions: [
    {
      type: 'TimeoutError',
      message: 'rollout took longer than 60 s',
      traceback: 'Traceback (most recent call last):\n  File "rollout.py", line 12\nTimeoutError',
    },
  ],
  metadata: { scenario: 'paris-1', tags: ['weather'] },
  metrics: { judge_agreement: 0.8, all_correct: false },
  logs: ['group started', 'group done'],
};

/** ART's `experimental_config`: every key present, unset ones `null`. */
export const artExperimentalConfig = {
  advantage_balance: null,
  allow_training_without_logprobs: null,
  epsilon: null,
  epsilon_high: null,
  importance_sampling_level: null,
  kimi_k2_tau: null,
  kl_penalty_coef: null,
  kl_penalty_reference_step: null,
  kl_penalty_source: null,
  kl_penalty_step_lag: null,
  kl_ref_adapter_path: null,
  learning_rate: 5e-6,
  logprob_calculation_chunk_size: null,
  loss_fn: 'cispo',
  mask_prob_ratio: null,
  max_negative_advantage_importance_sampling_weight: null,
  normalize_advantages: null,
  num_trajectories_learning_rate_multiplier_power: null,
  packed_sequence_length: null,
  plot_tensors: null,
  ppo: null,
  precalculate_logprobs: null,
  scale_learning_rate_by_reward_std_dev: null,
  scale_rewards: true,
  truncated_importance_sampling: null,
};

/** The full (newer) training-job form. */
export const fullTrainingJob = {
  id: JOB_ID,
  model_id: MODEL_ID,
  status: 'RUNNING',
  progress: 0.5,
  error_message: null,
  training_start: '2025-06-01T12:00:01.123456Z',
  training_end: null,
  created_at: '2025-06-01T12:00:00Z',
  updated_at: '2025-06-01T12:00:02+00:00',
};

/** A 422 body as FastAPI writes it (newer FastAPI adds `input` and `url`). */
export const fastApi422 = {
  detail: [
    {
      type: 'missing',
      loc: ['body', 'trajectory_groups', 0, 'trajectories'],
      msg: 'Field required',
      input: { exceptions: [] },
      url: 'https://errors.pydantic.dev/2.11/v/missing',
    },
    { type: 'uuid_parsing', loc: ['body', 'model_id'], msg: 'Input should be a valid UUID', ctx: { error: 'invalid length' } },
  ],
};
