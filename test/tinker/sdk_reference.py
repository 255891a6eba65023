"""The official tinker SDK (0.25.0, pinned in requirements.txt) against a Tinker server: the
reference the Tinker suite and bench/tinker.ts compare policyloop with.

One JSON object on stdin, one JSON object on stdout (the last line; the SDK logs to stderr).
Every input has `base_url` (the server's root, without /api/v1) and may have `api_key` (the SDK
wants a `tml-` prefix; SkyRL checks nothing) and `timeout_s` (the whole run, default 600).

mode "logprobs": the server's log-probabilities of given completion tokens after given prompts.
  in:  {"mode": "logprobs", "base_url": ..., "base_model": "<folder>" | "model_path": "tinker://...",
        "items": [{"prompt_tokens": [int], "completion_tokens": [int]}],
        "via": "sampler" (default) | "training", "rank": 8}
  out: {"mode": "logprobs", "via": ..., "results": [{"completion_logprobs": [float],
        "sequence_logprobs_count": int}], "seconds": float, "model_id": str (via "training" only)}
  "sampler" asks SamplingClient.compute_logprobs (asample with prompt_logprobs, max_tokens 1) of
  prompt + completion on the base model or on sampler weights; the last len(completion) values are
  the completion's. "training" (base model only) creates a LoRA training model of `rank` (its
  adapter starts at zero, so it is the base model), runs TrainingClient.forward with cross_entropy
  on the same tokens, then unloads the model.

mode "rl_step": the timing reference of one RL step, as policyloop's TinkerBackend does it.
  in:  {"mode": "rl_step", "base_url": ..., "base_model": "<folder>", "rank": 8,
        "prompt_tokens": [int], "num_samples": 16, "max_tokens": 16, "steps": 3,
        "learning_rate": 1e-4, "temperature": 1.0, "seed": 0, "pipelined": false}
  out: {"mode": "rl_step", "model_id": str, "create_model_s": float, "initial_save_s": float,
        "steps": [{"step": 1, "sample_s", "forward_backward_s", "optim_step_s",
                   "save_weights_for_sampler_s", "step_s", "sampler_path": str,
                   "completion_tokens": [int], "rewards": [float], "grad_norm": float | null,
                   "metrics": {...}}],
        "seconds": float}
  Setup: create a LoRA model, save its weights for the sampler as "step0". Each step then samples
  `num_samples` choices in one request from the latest sampler weights, runs one forward_backward
  with importance_sampling on them (the sampler's logprobs; advantages: the reward minus the
  group's mean, with a synthetic reward, the share of even token ids in a choice), optim_step
  (Adam with `learning_rate`), save_weights_for_sampler("stepN") and opens a sampling client on
  that path (counted in save_weights_for_sampler_s). With "pipelined", optim_step is submitted
  right after forward_backward without waiting, as the tinker cookbook does; optim_step_s is then
  the wait after forward_backward's result. The model is unloaded at the end.

Failures print {"error": "<type>: <message>"} and exit 1.
"""

import json
import logging
import os
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

import tinker
from tinker import types

DEFAULT_KEY = "tml-policyloop-reference"


def now() -> float:
    return time.perf_counter()


def service_client(spec: dict) -> tinker.ServiceClient:
    return tinker.ServiceClient(base_url=spec["base_url"], api_key=spec.get("api_key") or DEFAULT_KEY)


def post_json(spec: dict, route: str, body: dict, timeout: float = 60.0) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"{spec['base_url'].rstrip('/')}/api/v1/{route}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "x-api-key": spec.get("api_key") or DEFAULT_KEY},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except TimeoutError:
        # SkyRL holds retrieve_future open for up to 300 s: a read timeout means "poll again".
        return 408, b""


def unload(spec: dict, model_id: str) -> None:
    """Frees the model's LoRA slot. The SDK 0.25.0 has no public unload; this is its REST route."""
    status, body = post_json(spec, "unload_model", {"model_id": model_id, "type": "unload_model"})
    if status != 200:
        raise RuntimeError(f"unload_model {model_id} answered {status}: {body[:300]!r}")
    request_id = json.loads(body)["request_id"]
    deadline = now() + 120
    while now() < deadline:
        status, body = post_json(
            spec, "retrieve_future", {"request_id": request_id, "allow_metadata_only": True}, timeout=45.0
        )
        if status == 200 and b"try_again" not in body:
            return
        if status not in (200, 408):
            raise RuntimeError(f"unload_model {model_id}: retrieve_future answered {status}: {body[:300]!r}")
    raise RuntimeError(f"unload_model {model_id} did not complete within 120 s")


def tolist(value) -> list:
    return value.tolist() if hasattr(value, "tolist") else list(value)


def logprobs_mode(spec: dict) -> dict:
    started = now()
    items = spec["items"]
    via = spec.get("via", "sampler")
    client = service_client(spec)
    results = []
    if via == "sampler":
        if spec.get("model_path"):
            sampler = client.create_sampling_client(model_path=spec["model_path"])
        else:
            sampler = client.create_sampling_client(base_model=spec["base_model"])
        futures = [
            sampler.compute_logprobs(types.ModelInput.from_ints(item["prompt_tokens"] + item["completion_tokens"]))
            for item in items
        ]
        for item, future in zip(items, futures):
            values = future.result()
            completion = values[len(values) - len(item["completion_tokens"]) :]
            results.append({"completion_logprobs": completion, "sequence_logprobs_count": len(values)})
    elif via == "training":
        if spec.get("model_path"):
            raise ValueError('via "training" reads the base model only; pass base_model, not model_path')
        trainer = client.create_lora_training_client(base_model=spec["base_model"], rank=spec.get("rank", 8))
        try:
            data = []
            for item in items:
                tokens = item["prompt_tokens"] + item["completion_tokens"]
                data.append(
                    types.Datum(
                        model_input=types.ModelInput.from_ints(tokens[:-1]),
                        loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
                    )
                )
            output = trainer.forward(data, "cross_entropy").result()
            for item, out in zip(items, output.loss_fn_outputs):
                values = tolist(out["logprobs"])
                completion = values[len(values) - len(item["completion_tokens"]) :]
                results.append({"completion_logprobs": completion, "sequence_logprobs_count": len(values)})
        except BaseException:
            try:
                unload(spec, trainer.model_id)
            except Exception:  # noqa: BLE001 - the first failure is the one to report
                pass
            raise
        unload(spec, trainer.model_id)
        return {"mode": "logprobs", "via": via, "model_id": trainer.model_id, "results": results, "seconds": now() - started}
    else:
        raise ValueError(f'Expected "via" to be "sampler" or "training", got {via!r}')
    return {"mode": "logprobs", "via": via, "results": results, "seconds": now() - started}


def rl_step_mode(spec: dict) -> dict:
    started = now()
    client = service_client(spec)
    num_samples = spec.get("num_samples", 16)
    max_tokens = spec.get("max_tokens", 16)
    prompt_tokens = spec["prompt_tokens"]
    prompt = types.ModelInput.from_ints(prompt_tokens)
    pipelined = bool(spec.get("pipelined", False))
    adam = types.AdamParams(learning_rate=spec.get("learning_rate", 1e-4))

    t = now()
    trainer = client.create_lora_training_client(base_model=spec["base_model"], rank=spec.get("rank", 8))
    create_model_s = now() - t
    try:
        t = now()
        path = trainer.save_weights_for_sampler("step0").result().path
        sampler = client.create_sampling_client(model_path=path)
        initial_save_s = now() - t

        steps = []
        for step in range(1, spec.get("steps", 1) + 1):
            step_start = now()
            params = types.SamplingParams(
                max_tokens=max_tokens,
                temperature=spec.get("temperature", 1.0),
                seed=spec.get("seed", 0) + step,
            )
            sampled = sampler.sample(prompt=prompt, num_samples=num_samples, sampling_params=params).result()
            sample_s = now() - step_start

            completions = [list(sequence.tokens) for sequence in sampled.sequences]
            rewards = [sum(1 for token in tokens if token % 2 == 0) / max(1, len(tokens)) for tokens in completions]
            mean = sum(rewards) / len(rewards)
            data = []
            for sequence, tokens, reward in zip(sampled.sequences, completions, rewards):
                full = prompt_tokens + tokens
                padding = [0.0] * (len(prompt_tokens) - 1)
                data.append(
                    types.Datum(
                        model_input=types.ModelInput.from_ints(full[:-1]),
                        loss_fn_inputs={
                            "target_tokens": full[1:],
                            "logprobs": padding + [float(value) for value in sequence.logprobs],
                            "advantages": padding + [reward - mean] * len(tokens),
                        },
                    )
                )

            t = now()
            fwdbwd_future = trainer.forward_backward(data, "importance_sampling")
            optim_future = trainer.optim_step(adam) if pipelined else None
            fwdbwd = fwdbwd_future.result()
            forward_backward_s = now() - t
            t = now()
            optim = (optim_future if optim_future is not None else trainer.optim_step(adam)).result()
            optim_step_s = now() - t

            t = now()
            path = trainer.save_weights_for_sampler(f"step{step}").result().path
            sampler = client.create_sampling_client(model_path=path)
            save_s = now() - t

            metrics = dict(optim.metrics or {})
            steps.append(
                {
                    "step": step,
                    "sample_s": sample_s,
                    "forward_backward_s": forward_backward_s,
                    "optim_step_s": optim_step_s,
                    "save_weights_for_sampler_s": save_s,
                    "step_s": now() - step_start,
                    "sampler_path": path,
                    "completion_tokens": [len(tokens) for tokens in completions],
                    "rewards": rewards,
                    "grad_norm": metrics.get("skyrl.ai/grad_norm"),
                    "metrics": {**metrics, **dict(fwdbwd.metrics or {})},
                }
            )
    except BaseException:
        try:
            unload(spec, trainer.model_id)
        except Exception:  # noqa: BLE001 - the first failure is the one to report
            pass
        raise
    unload(spec, trainer.model_id)
    return {
        "mode": "rl_step",
        "model_id": trainer.model_id,
        "create_model_s": create_model_s,
        "initial_save_s": initial_save_s,
        "steps": steps,
        "seconds": now() - started,
    }


MODES = {"logprobs": logprobs_mode, "rl_step": rl_step_mode}


def give_up(timeout: float) -> None:
    """The watchdog: the SDK retries some failures for minutes, so the whole run is bounded."""
    print(json.dumps({"error": f"TimeoutError: the run took over {timeout} s"}), flush=True)
    os._exit(1)


def main() -> int:
    # The SDK's own warnings (retries, connection errors) go to stderr, which the caller keeps.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        spec = json.loads(sys.stdin.read())
        mode = MODES.get(spec.get("mode"))
        if mode is None:
            raise ValueError(f"Expected mode to be one of {sorted(MODES)}, got {spec.get('mode')!r}")
        timeout = float(spec.get("timeout_s", 600))
        watchdog = threading.Timer(timeout, give_up, args=(timeout,))
        watchdog.daemon = True
        watchdog.start()
        result = mode(spec)
        watchdog.cancel()
    except Exception as error:  # noqa: BLE001 - every failure is reported as JSON
        traceback.print_exc()
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    # The SDK keeps a background thread (its event loop, heartbeats): leave without joining it.
    os._exit(main())
