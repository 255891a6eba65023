/**
 * Real exchanges between the official `tinker` 0.25.0 Python SDK and SkyRL 0.4.0's Tinker server
 * (JAX backend, CPU, a tiny random Qwen3 folder), captured on loopback by a logging proxy. Copied
 * from the team's wire notes (`wire-examples.md`, beside the Tinker `.proto` files): each protobuf
 * body as the base64 of its bytes, with the same message in the protobuf JSON mapping (bytes as
 * base64, int64 as strings) that the proxy printed. The tests decode the bytes through the client
 * and read the expected numbers from the JSON view, so both sides come from the capture.
 *
 * Token ids, for reading: the forward_backward datum's input is
 * [259, 286, 267, 81, 84, 78, 70, 14, 223, 259, 286, 290, 266, 77] and its targets are the same
 * shifted by one, ending in 282; the first sampled sequence is [174, 266, 30, 255, 198, 270, 270, 1].
 */

/** The SDK's `forward_backward` request body (protobuf, 313 bytes). */
export const FORWARD_BACKWARD_REQUEST_BASE64 =
  'Cg5tb2RlbF8zYjFmNzI4YxABGpUCCjwKOgo4AwEAAB4BAAALAQAAUQAAAFQAAABOAAAARgAAAA4AAADfAAAAAwEAAB4BAAAiAQAACgEAAE0AAAASiAEKDXRhcmdldF90b2tlbnMSdwpwHgEAAAAAAAALAQAAAAAAAFEAAAAAAAAAVAAAAAAAAABOAAAAAAAAAEYAAAAAAAAADgAAAAAAAADfAAAAAAAAAAMBAAAAAAAAHgEAAAAAAAAiAQAAAAAAAAoBAAAAAAAATQAAAAAAAAAaAQAAAAAAABgCIgEOEkoKB3dlaWdodHMSPwo4AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8YASIBDiINY3Jvc3NfZW50cm9weQ==';

/** The same request in the protobuf JSON mapping (bytes as base64, int64 as strings). */
export const FORWARD_BACKWARD_REQUEST_VIEW = {
  model_id: 'model_3b1f728c',
  seq_id: 1,
  data: [
    {
      model_input: [
        {
          encoded_text: {
            tokens: 'AwEAAB4BAAALAQAAUQAAAFQAAABOAAAARgAAAA4AAADfAAAAAwEAAB4BAAAiAQAACgEAAE0AAAA=',
          },
        },
      ],
      loss_fn_inputs: {
        target_tokens: {
          dense:
            'HgEAAAAAAAALAQAAAAAAAFEAAAAAAAAAVAAAAAAAAABOAAAAAAAAAEYAAAAAAAAADgAAAAAAAADfAAAAAAAAAAMBAAAAAAAAHgEAAAAAAAAiAQAAAAAAAAoBAAAAAAAATQAAAAAAAAAaAQAAAAAAAA==',
          dtype: 'DTYPE_INT64',
          shape: ['14'],
        },
        weights: {
          dense: 'AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8AAIA/AACAPwAAgD8=',
          dtype: 'DTYPE_FLOAT32',
          shape: ['14'],
        },
      },
    },
  ],
  loss_fn: 'cross_entropy',
};

/** The server's `ForwardBackwardOutput` for that request (protobuf, 205 bytes). */
export const FORWARD_BACKWARD_OUTPUT_BASE64 =
  'CgZzY2FsYXISwgESYgoQZWxlbWVudHdpc2VfbG9zcxJOCjgupB5BgrpJQYiGq0DjkQpBOAnsQIAg5kDYMBJBCGP3QGVaF0GU8g1BhEYUQXmzCUG0dQ9B6xcPQRIQAAAAAAAAAAA4AAAAAAAAABgBEloKCGxvZ3Byb2JzEk4KOC6kHsGCuknBiIarwOORCsE4CezAgCDmwNgwEsEIY/fAZVoXwZTyDcGERhTBebMJwbR1D8HrFw/BEhAAAAAAAAAAADgAAAAAAAAAGAEYAQ==';

/** The same output in the protobuf JSON mapping. */
export const FORWARD_BACKWARD_OUTPUT_VIEW = {
  loss_fn_output_type: 'scalar',
  loss_fn_outputs: [
    {
      fields: {
        logprobs: {
          data: 'LqQewYK6ScGIhqvA45EKwTgJ7MCAIObA2DASwQhj98BlWhfBlPINwYRGFMF5swnBtHUPwesXD8E=',
          offsets: 'AAAAAAAAAAA4AAAAAAAAAA==',
          dtype: 'DTYPE_FLOAT32',
        },
        elementwise_loss: {
          data: 'LqQeQYK6SUGIhqtA45EKQTgJ7ECAIOZA2DASQQhj90BlWhdBlPINQYRGFEF5swlBtHUPQesXD0E=',
          offsets: 'AAAAAAAAAAA4AAAAAAAAAA==',
          dtype: 'DTYPE_FLOAT32',
        },
      },
      num_datums: '1',
    },
  ],
};

/** The server's `ForwardBackwardOutput` of a forward-only call after a training step (protobuf, 205 bytes). */
export const FORWARD_OUTPUT_BASE64 =
  'CgZzY2FsYXISwgESYgoQZWxlbWVudHdpc2VfbG9zcxJOCjg0CJRAK7YAQQJxpECUAj1AIFyTPoa8CEBSf1FAQM31PtYEVED8kTNAQH+JPgBk6TwQwmU/IGkePxIQAAAAAAAAAAA4AAAAAAAAABgBEloKCGxvZ3Byb2JzEk4KODQIlMArtgDBAnGkwJQCPcAgXJO+hrwIwFJ/UcBAzfW+1gRUwPyRM8BAf4m+AGTpvBDCZb8gaR6/EhAAAAAAAAAAADgAAAAAAAAAGAEYAQ==';

/** The same output in the protobuf JSON mapping. */
export const FORWARD_OUTPUT_VIEW = {
  loss_fn_output_type: 'scalar',
  loss_fn_outputs: [
    {
      fields: {
        logprobs: {
          data: 'NAiUwCu2AMECcaTAlAI9wCBck76GvAjAUn9RwEDN9b7WBFTA/JEzwEB/ib4AZOm8EMJlvyBpHr8=',
          offsets: 'AAAAAAAAAAA4AAAAAAAAAA==',
          dtype: 'DTYPE_FLOAT32',
        },
        elementwise_loss: {
          data: 'NAiUQCu2AEECcaRAlAI9QCBckz6GvAhAUn9RQEDN9T7WBFRA/JEzQEB/iT4AZOk8EMJlPyBpHj8=',
          offsets: 'AAAAAAAAAAA4AAAAAAAAAA==',
          dtype: 'DTYPE_FLOAT32',
        },
      },
      num_datums: '1',
    },
  ],
};

/** The SDK's `asample` request (JSON). */
export const SAMPLE_REQUEST = {
  num_samples: 4,
  prompt: {
    chunks: [
      {
        tokens: [259, 286],
        type: 'encoded_text',
      },
    ],
  },
  sampling_params: {
    max_tokens: 8,
    seed: 1,
    temperature: 1.0,
    top_k: -1,
    top_p: 1.0,
  },
  sampling_session_id: 'sampling_66c92195',
  seq_id: 0,
  prompt_logprobs: false,
  topk_prompt_logprobs: 0,
  type: 'sample',
};

/** The server's `SampleResponse` for it (protobuf, 288 bytes). */
export const SAMPLE_RESPONSE_BASE64 =
  'CkYIARIgrgAAAAoBAAAeAAAA/wAAAMYAAAAOAQAADgEAAAEAAAAaIFD9GcDg9nq/ouJywBhUBsBS2yjAwHnnvzpiAsDEzs6/CkYIARIgugAAAO0AAAAbAQAAzgAAAN8AAABTAAAA5gAAALsAAAAaII68x8AgUbfA4DCjwNhIycCquJTAmOZiwMAEtr88XanACkYIARIg1AAAAMEAAAAHAQAAjQAAAF0AAAAKAQAAOwAAAKoAAAAaIJhlocAA9zLA4mZqwKCdHsACgKTAMGUjvziRScDoFRfBCkYIARIgVwAAAIcAAACeAAAAAQAAAE4AAABOAAAAxgAAAKYAAAAaILEH1MDV557A1v2+wBhpvr/sNaG/RMCqv4aQtsA4J33A';

/** The same response in the protobuf JSON mapping. */
export const SAMPLE_RESPONSE_VIEW = {
  sequences: [
    {
      stop_reason: 'STOP_REASON_LENGTH',
      tokens: 'rgAAAAoBAAAeAAAA/wAAAMYAAAAOAQAADgEAAAEAAAA=',
      logprobs: 'UP0ZwOD2er+i4nLAGFQGwFLbKMDAeee/OmICwMTOzr8=',
    },
    {
      stop_reason: 'STOP_REASON_LENGTH',
      tokens: 'ugAAAO0AAAAbAQAAzgAAAN8AAABTAAAA5gAAALsAAAA=',
      logprobs: 'jrzHwCBRt8DgMKPA2EjJwKq4lMCY5mLAwAS2vzxdqcA=',
    },
    {
      stop_reason: 'STOP_REASON_LENGTH',
      tokens: '1AAAAMEAAAAHAQAAjQAAAF0AAAAKAQAAOwAAAKoAAAA=',
      logprobs: 'mGWhwAD3MsDiZmrAoJ0ewAKApMAwZSO/OJFJwOgVF8E=',
    },
    {
      stop_reason: 'STOP_REASON_LENGTH',
      tokens: 'VwAAAIcAAACeAAAAAQAAAE4AAABOAAAAxgAAAKYAAAA=',
      logprobs: 'sQfUwNXnnsDW/b7AGGm+v+w1ob9EwKq/hpC2wDgnfcA=',
    },
  ],
};

/** The SDK's `create_model` request (JSON; the base model folder is elided in the capture). */
export const CREATE_MODEL_REQUEST = {
  session_id: 'session_ca8b44fc',
  model_seq_id: 0,
  base_model: '<model folder>',
  lora_config: {
    rank: 4,
    seed: 0,
    train_unembed: true,
    train_mlp: true,
    train_attn: true,
  },
  type: 'create_model',
};

/** The future's result of `create_model`. */
export const CREATE_MODEL_RESULT = {
  model_id: 'model_3b1f728c',
  base_model: '<model folder>',
  lora_config: {
    rank: 4,
    alpha: 32.0,
    seed: 0,
    train_attn: true,
    train_mlp: true,
    train_unembed: false,
  },
};

/** The SDK's `optim_step` request (JSON), the call after the forward_backward above. */
export const OPTIM_STEP_REQUEST = {
  adam_params: {
    learning_rate: 0.01,
    beta1: 0.9,
    beta2: 0.95,
    eps: 1e-12,
    weight_decay: 0.0,
    grad_clip_norm: 0.0,
  },
  model_id: 'model_3b1f728c',
  seq_id: 2,
  type: 'optim_step',
};

/** The future's result of `optim_step` (SkyRL's metric names). */
export const OPTIM_STEP_RESULT = {
  metrics: {
    'skyrl.ai/grad_norm': 20.115957260131836,
    'skyrl.ai/learning_rate': 0.009999999776482582,
  },
};

/** The SDK's `save_weights_for_sampler` request (JSON). */
export const SAVE_WEIGHTS_FOR_SAMPLER_REQUEST = {
  model_id: 'model_3b1f728c',
  path: 'step2',
  seq_id: 5,
  type: 'save_weights_for_sampler',
};

/** The future's result of `save_weights_for_sampler`. */
export const SAVE_WEIGHTS_FOR_SAMPLER_RESULT = {
  path: 'tinker://model_3b1f728c/step2',
  type: 'save_weights_for_sampler',
  sampling_session_id: null,
};
