/**
 * `policyloop/tinker`: the Tinker API's own client, below `TinkerBackend`, for what the backend
 * does not do: list and delete the weights a Tinker server keeps (`listServerCheckpoints` marks
 * the ones no checkpoint of a data directory records), read its training runs, sample or train
 * by hand. It loads `@bufbuild/protobuf` (an optional dependency) at once.
 * @module
 */
export { TinkerClient, TINKER_SDK_VERSION } from './backends/tinker/tinker-client.js';
export type {
  TinkerClientOptions,
  AdamParams,
  ForwardBackwardResult,
  LoraSettings,
  SampleParams,
  TinkerCheckpoint,
  TinkerDatum,
  TinkerDatumOutput,
  TinkerSampleResult,
  TinkerSequence,
  TinkerTrainingRun,
} from './backends/tinker/tinker-client.js';
export { listServerCheckpoints, recordedTinkerPaths } from './backends/tinker/server-checkpoints.js';
export type { ListServerCheckpointsOptions, ServerCheckpoint } from './backends/tinker/server-checkpoints.js';
