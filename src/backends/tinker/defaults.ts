/** Defaults of the Tinker backend, in a module that loads nothing else (the backend's entry imports it). */

/** Hosted Tinker's API (the official SDK's default). */
export const HOSTED_TINKER_URL = 'https://tinker.thinkingmachines.dev/services/tinker-prod';
/** LoRA rank of new training models (hosted Tinker's default). */
export const DEFAULT_TINKER_LORA_RANK = 32;
/** RL and SFT learning rate when a job names none: a LoRA rate for small and mid-size models. */
export const TINKER_DEFAULT_LEARNING_RATE = 1e-4;
