/** Corpus of the model, checkpoint, training-job, event, page and error bodies. */
import { cases, type CorpusCase } from './case.js';
import {
  artExperimentalConfig,
  artGroup,
  CHECKPOINT_ID,
  EVENT_IDS,
  fastApi422,
  fullTrainingJob,
  JOB_ID,
  MODEL_ID,
} from './fixtures.js';

const modelResponse = {
  id: MODEL_ID,
  entity: 'my-team',
  project: 'weather',
  name: 'agent-001',
  base_model: 'OpenPipe/Qwen3-14B-Instruct',
  run_id: 'abc123',
};
const checkpoint = { id: CHECKPOINT_ID, step: 3, metrics: { 'train/reward': 0.5, loss: 1 } };
const { progress: _progress, ...jobWithoutProgress } = fullTrainingJob;
const events = [
  { id: EVENT_IDS[0], type: 'training_started', data: { num_sequences: 4 } },
  { id: EVENT_IDS[1], type: 'gradient_step', data: { loss: 0.42, policy_loss: 0.4, entropy: 1.3, learning_rate: 5e-6, num_trajectories: 8 } },
  { id: EVENT_IDS[2], type: 'training_ended', data: {} },
];

export const apiCases: CorpusCase[] = [
  ...cases('Uuid', true, [
    ['v4', MODEL_ID],
    ['upper-case', MODEL_ID.toUpperCase()],
    ['nil', '00000000-0000-0000-0000-000000000000'],
  ]),
  ...cases('Uuid', false, [
    ['no-hyphens', MODEL_ID.replaceAll('-', '')],
    ['short', '3f2b6c1e-8d4a-4e7b-9c2f'],
    ['braced', `{${MODEL_ID}}`],
    // RFC 4122's URN form: ajv-formats accepts it, the service never sends it.
    ['urn', `urn:uuid:${MODEL_ID}`],
  ]),
  ...cases('ModelCreate', true, [
    ['art-get-or-create', { entity: 'my-team', project: 'weather', name: 'agent-001', base_model: 'OpenPipe/Qwen3-14B-Instruct', return_existing: true }],
    ['null-entity', { entity: null, project: 'p', name: 'n', base_model: 'tiny' }],
    ['no-entity', { project: 'p', name: 'n', base_model: 'tiny' }],
    ['extra-key', { project: 'p', name: 'n', base_model: 'tiny', trainable: true }],
  ]),
  ...cases('ModelCreate', false, [
    ['missing-project', { name: 'n', base_model: 'tiny' }],
    ['missing-base-model', { project: 'p', name: 'n' }],
    ['return-existing-string', { project: 'p', name: 'n', base_model: 'tiny', return_existing: 'true' }],
    ['entity-number', { entity: 1, project: 'p', name: 'n', base_model: 'tiny' }],
  ]),
  ...cases('ModelResponse', true, [
    ['full', modelResponse],
    ['null-run-id', { ...modelResponse, run_id: null }],
    ['no-run-id', { id: MODEL_ID, entity: 'e', project: 'p', name: 'n', base_model: 'b' }],
  ]),
  ...cases('ModelResponse', false, [
    ['id-not-uuid', { ...modelResponse, id: 'model-1' }],
    ['null-entity', { ...modelResponse, entity: null }],
    ['missing-name', { id: MODEL_ID, entity: 'e', project: 'p', base_model: 'b' }],
  ]),
  ...cases('DeleteModelResponse', true, [['plain', { model_id: MODEL_ID, deleted_checkpoints: 3, deleted_run: true }]]),
  ...cases('DeleteModelResponse', false, [
    ['count-float', { model_id: MODEL_ID, deleted_checkpoints: 1.5, deleted_run: false }],
    ['missing-run', { model_id: MODEL_ID, deleted_checkpoints: 0 }],
  ]),
  ...cases('CheckpointResponse', true, [
    ['plain', checkpoint],
    ['no-metrics', { id: CHECKPOINT_ID, step: 1, metrics: {} }],
  ]),
  ...cases('CheckpointResponse', false, [
    ['boolean-metric', { ...checkpoint, metrics: { converged: true } }],
    ['step-string', { ...checkpoint, step: '3' }],
    ['missing-metrics', { id: CHECKPOINT_ID, step: 1 }],
  ]),
  ...cases('CheckpointPage', true, [
    ['full', { object: 'list', data: [checkpoint], first_id: CHECKPOINT_ID, last_id: CHECKPOINT_ID, has_more: false }],
    ['minimal', { data: [], has_more: false }],
  ]),
  ...cases('CheckpointPage', false, [
    ['missing-has-more', { object: 'list', data: [], first_id: '', last_id: '' }],
    ['bad-item', { data: [{ id: CHECKPOINT_ID, step: 'one', metrics: {} }], has_more: false }],
    ['null-last-id', { data: [], has_more: false, last_id: null }],
  ]),
  ...cases('DeleteCheckpointsRequest', true, [
    ['steps', { steps: [1, 2, 5] }],
    ['empty', { steps: [] }],
  ]),
  ...cases('DeleteCheckpointsRequest', false, [
    ['step-float', { steps: [1.5] }],
    ['missing-steps', {}],
    ['steps-string', { steps: '1,2' }],
  ]),
  ...cases('DeleteCheckpointsResponse', true, [['plain', { deleted_count: 2, not_found_steps: [5] }]]),
  ...cases('DeleteCheckpointsResponse', false, [['missing-not-found', { deleted_count: 2 }]]),
  ...cases('ExperimentalTrainingConfig', true, [
    ['art-every-key', artExperimentalConfig],
    ['empty', {}],
    [
      'ppo-all-set',
      {
        loss_fn: 'ppo',
        ppo: true,
        epsilon: 0.2,
        epsilon_high: 0.28,
        importance_sampling_level: 'sequence',
        kl_penalty_coef: 0.01,
        kl_penalty_source: 'sample',
        kl_penalty_reference_step: 0,
        normalize_advantages: false,
        packed_sequence_length: 2048,
      },
    ],
    ['unknown-key', { learning_rate: 1e-5, future_option: 1 }],
  ]),
  ...cases('LossFn', true, [
    ['importance-sampling', 'importance_sampling'],
    ['dro', 'dro'],
    ['cispo', 'cispo'],
  ]),
  ...cases('LossFn', false, [
    ['grpo', 'grpo'],
    ['cross-entropy', 'cross_entropy'],
  ]),
  ...cases('ExperimentalTrainingConfig', false, [
    ['loss-fn-unknown', { loss_fn: 'grpo' }],
    ['learning-rate-string', { learning_rate: '1e-5' }],
    ['sequence-length-float', { packed_sequence_length: 2048.5 }],
    ['importance-level-unknown', { importance_sampling_level: 'batch' }],
  ]),
  ...cases('CreateTrainingJob', true, [
    ['art-body', { model_id: MODEL_ID, trajectory_groups: [artGroup], experimental_config: artExperimentalConfig }],
    ['null-config', { model_id: MODEL_ID, trajectory_groups: [{ trajectories: [{ reward: 1 }, { reward: 0 }] }], experimental_config: null }],
    ['no-config', { model_id: MODEL_ID, trajectory_groups: [] }],
  ]),
  ...cases('CreateTrainingJob', false, [
    ['model-id-not-uuid', { model_id: 'agent-001', trajectory_groups: [] }],
    ['missing-groups', { model_id: MODEL_ID }],
    ['bad-config', { model_id: MODEL_ID, trajectory_groups: [], experimental_config: { loss_fn: 'dpo' } }],
  ]),
  ...cases('SFTMetricLoggingConfig', true, [
    ['enabled', { enabled: true, target_training_step: 3 }],
    ['empty', {}],
    ['null-step', { enabled: false, target_training_step: null }],
  ]),
  ...cases('SFTMetricLoggingConfig', false, [
    ['step-zero', { enabled: true, target_training_step: 0 }],
    ['enabled-string', { enabled: 'yes' }],
    // Closed in the newer document; the older one lets any object through.
    ['unknown-key', { enabled: true, every: 10 }],
  ]),
  ...cases('SFTTrainingConfig', true, [
    ['empty', {}],
    ['auto-batch', { batch_size: 'auto', learning_rate: 2e-5 }],
    ['schedule', { batch_size: 8, learning_rate: [1e-5, 2e-5, 1e-5], assistant_turns: 'last' }],
    ['metric-logging', { metric_logging: { enabled: true, target_training_step: 2 } }],
    ['nulls', { batch_size: null, learning_rate: null, metric_logging: null }],
  ]),
  ...cases('SFTTrainingConfig', false, [
    ['batch-size-word', { batch_size: 'big' }],
    ['batch-size-float', { batch_size: 2.5 }],
    ['learning-rate-strings', { learning_rate: ['1e-5'] }],
    ['assistant-turns-first', { assistant_turns: 'first' }],
    ['unknown-key', { epochs: 3 }],
    ['metric-logging-unknown-key', { metric_logging: { enabled: true, every: 10 } }],
  ]),
  ...cases('SFTExperimentalTrainingConfig', true, [['empty', {}]]),
  ...cases('SFTExperimentalTrainingConfig', false, [['any-key', { packing: true }]]),
  ...cases('CreateSFTTrainingJob', true, [
    ['minimal', { model_id: MODEL_ID, training_data_url: 'wandb-artifact:///team/proj/sft-data:v0' }],
    ['with-config', { model_id: MODEL_ID, training_data_url: 'file:///tmp/sft.jsonl', config: { batch_size: 'auto', learning_rate: 1e-4 }, experimental_config: null }],
    ['null-config', { model_id: MODEL_ID, training_data_url: 'data:application/jsonl,{}', config: null }],
    ['empty-experimental', { model_id: MODEL_ID, training_data_url: 'https://x/sft.jsonl', experimental_config: {} }],
  ]),
  ...cases('CreateSFTTrainingJob', false, [
    ['missing-url', { model_id: MODEL_ID }],
    ['model-id-not-uuid', { model_id: 'm', training_data_url: 'file:///a' }],
    ['bad-config', { model_id: MODEL_ID, training_data_url: 'file:///a', config: { batch_size: 0.5 } }],
    ['unknown-key', { model_id: MODEL_ID, training_data_url: 'file:///a', epochs: 2 }],
    ['experimental-key', { model_id: MODEL_ID, training_data_url: 'file:///a', experimental_config: { packing: true } }],
  ]),
  ...cases('TrainingJobStatus', true, [
    ['pending', 'PENDING'],
    ['cancelled', 'CANCELLED'],
  ]),
  ...cases('TrainingJobStatus', false, [
    ['lower-case', 'running'],
    ['unknown', 'QUEUED'],
  ]),
  ...cases('TrainingJobDetails', true, [
    ['running', fullTrainingJob],
    ['completed', { ...fullTrainingJob, status: 'COMPLETED', progress: 1, training_end: '2025-06-01T12:05:00Z' }],
    ['pending-nulls', { ...fullTrainingJob, status: 'PENDING', progress: null, training_start: null }],
  ]),
  ...cases('TrainingJobDetails', false, [
    ['short-form', { id: JOB_ID }],
    ['missing-progress', jobWithoutProgress],
    ['bad-status', { ...fullTrainingJob, status: 'DONE' }],
  ]),
  ...cases('TrainingJobResponse', true, [
    // The older document's `{id}` and the newer full form: a client must accept both.
    ['short-form', { id: JOB_ID }],
    ['full-form', fullTrainingJob],
    ['failed', { ...fullTrainingJob, status: 'FAILED', error_message: 'CUDA out of memory', training_end: '2025-06-01T12:01:00Z' }],
    ['extra-key', { ...fullTrainingJob, queue_position: 2 }],
  ]),
  ...cases('TrainingJobResponse', false, [
    ['missing-id', { status: 'RUNNING' }],
    ['id-not-uuid', { id: 'job-1' }],
    ['bad-status', { ...fullTrainingJob, status: 'DONE' }],
    ['bad-timestamp', { ...fullTrainingJob, created_at: '1 June 2025' }],
  ]),
  ...cases('TrainingJobEventType', true, [
    ['started', 'training_started'],
    ['failed', 'training_failed'],
  ]),
  ...cases('TrainingJobEventType', false, [['unknown', 'checkpoint_saved']]),
  ...cases('TrainingJobEventResponse', true, [
    ['started', events[0]],
    ['gradient-step', events[1]],
    ['ended', events[2]],
    ['failed', { id: EVENT_IDS[2], type: 'training_failed', data: { error_message: 'loss is NaN' } }],
  ]),
  ...cases('TrainingJobEventResponse', false, [
    ['unknown-type', { id: EVENT_IDS[0], type: 'epoch_end', data: {} }],
    ['data-array', { id: EVENT_IDS[0], type: 'gradient_step', data: [0.4] }],
    ['id-not-uuid', { id: '1', type: 'training_ended', data: {} }],
  ]),
  ...cases('TrainingJobEventPage', true, [
    ['first-page', { object: 'list', data: events.slice(0, 2), first_id: EVENT_IDS[0], last_id: EVENT_IDS[1], has_more: true }],
    ['last-page', { object: 'list', data: events.slice(2), first_id: EVENT_IDS[2], last_id: EVENT_IDS[2], has_more: false }],
    ['empty', { object: 'list', data: [], first_id: '', last_id: '', has_more: false }],
  ]),
  ...cases('TrainingJobEventPage', false, [
    ['has-more-string', { data: [], has_more: 'false' }],
    ['bad-event', { data: [{ id: EVENT_IDS[0], type: 'nope', data: {} }], has_more: false }],
  ]),
  // What a client accepts from a (possibly newer) service: known types and any new type string.
  ...cases('ReceivedTrainingJobEvent', true, [
    ['known', events[1]],
    ['newer-type', { id: EVENT_IDS[0], type: 'checkpoint_uploaded', data: { bytes: 1234 } }],
  ]),
  ...cases('ReceivedTrainingJobEvent', false, [
    ['empty-type', { id: EVENT_IDS[0], type: '', data: {} }],
    ['type-number', { id: EVENT_IDS[0], type: 3, data: {} }],
    ['id-not-uuid', { id: '1', type: 'checkpoint_uploaded', data: {} }],
  ]),
  ...cases('ReceivedTrainingJobEventPage', true, [
    ['mixed', { object: 'list', data: [events[0], { id: EVENT_IDS[1], type: 'epoch_end', data: {} }], first_id: EVENT_IDS[0], last_id: EVENT_IDS[1], has_more: false }],
  ]),
  ...cases('ReceivedTrainingJobEventPage', false, [
    ['data-array', { data: [{ id: EVENT_IDS[0], type: 'epoch_end', data: [1] }], has_more: false }],
  ]),
  ...cases('TrainingStartedData', true, [['plain', { num_sequences: 4 }]]),
  ...cases('TrainingStartedData', false, [['float', { num_sequences: 1.5 }]]),
  ...cases('GradientStepData', true, [['metrics', events[1]?.data]]),
  ...cases('GradientStepData', false, [['boolean', { converged: true }]]),
  ...cases('TrainingFailedData', true, [['plain', { error_message: 'boom' }]]),
  ...cases('TrainingFailedData', false, [['missing-message', {}]]),
  ...cases('BaseModelList', true, [
    ['two', ['OpenPipe/Qwen3-14B-Instruct', 'Qwen/Qwen2.5-7B-Instruct']],
    ['empty', []],
  ]),
  ...cases('BaseModelList', false, [
    ['objects', [{ id: 'Qwen/Qwen2.5-7B-Instruct' }]],
    ['object', { data: [] }],
  ]),
  ...cases('ValidationError', true, [
    ['fastapi', fastApi422.detail[0]],
    ['plain', { loc: ['query', 'limit'], msg: 'Input should be less than or equal to 100', type: 'less_than_equal' }],
  ]),
  ...cases('ValidationError', false, [
    ['loc-string', { loc: 'body', msg: 'x', type: 'missing' }],
    ['loc-float', { loc: ['body', 0.5], msg: 'x', type: 'missing' }],
  ]),
  ...cases('HTTPValidationError', true, [
    ['fastapi', fastApi422],
    ['empty-detail', { detail: [] }],
    ['no-detail', {}],
  ]),
  ...cases('HTTPValidationError', false, [
    // The body of other errors (404, 409, ...) is `{detail: "<message>"}`, not a 422 body.
    ['detail-string', { detail: 'Not found' }],
    ['item-missing-msg', { detail: [{ loc: ['body'], type: 'missing' }] }],
  ]),
  ...cases('SystemCheckResult', true, [
    ['ok', { success: true, duration_ms: 3 }],
    ['failed', { success: false, error: 'queue unreachable' }],
  ]),
  ...cases('SystemCheckResult', false, [['missing-success', { duration_ms: 3 }]]),
  ...cases('EngineRuntimeReport', true, [
    ['onnxruntime', { name: 'onnxruntime', version: '1.30.0', threads: 2, fallback_reason: null, description: 'onnxruntime 1.30.0, 2 threads' }],
    ['fallback', { name: 'tfjs-wasm', version: '4.22.0', threads: 1, fallback_reason: 'not installed', description: 'tfjs-wasm 4.22.0, 1 thread (fallback: not installed)' }],
  ]),
  ...cases('EngineRuntimeReport', false, [['threads-string', { name: 'onnxruntime', version: '1.30.0', threads: '2', fallback_reason: null, description: '' }]]),
  ...cases('SystemCheckResponse', true, [
    [
      'healthy',
      {
        api: true,
        database: { success: true, duration_ms: 1.2 },
        cpu_queue: { success: true, duration_ms: 0.4, error: null },
        gpu_queue: { success: true },
      },
    ],
    [
      'with-runtime',
      {
        api: true,
        database: true,
        cpu_queue: { success: true },
        gpu_queue: { success: true, device: 'cpu', runtime: { name: 'tfjs-wasm', version: '4.22.0', threads: 1, fallback_reason: null, description: 'tfjs-wasm 4.22.0, 1 thread' } },
      },
    ],
    ['database-boolean', { api: true, database: true, cpu_queue: { success: true }, gpu_queue: { success: false, error: 'no workers' } }],
  ]),
  ...cases('SystemCheckResponse', false, [
    ['missing-queues', { api: true, database: true }],
    ['runtime-without-name', { api: true, database: true, cpu_queue: { success: true }, gpu_queue: { success: true, runtime: { threads: 1 } } }],
  ]),
  // The client's view of a system check: the contract's 200 schema is empty, so any JSON passes.
  ...cases('SystemCheckReport', true, [
    ['described', { api: true, database: true, cpu_queue: { success: true }, gpu_queue: { success: true } }],
    ['other-object', { status: 'ok' }],
    ['known-key-other-type', { api: 'up' }],
    ['string', 'ok'],
    ['null', null],
  ]),
  ...cases('SystemCheckReport', false, [
    ['not-json-number', Number.NaN],
    ['not-json-function', () => 'ok'],
  ]),
];
