"""An ART user's training script, run unchanged against `policyloop serve`.

Drives the real OpenPipe ART client (`openpipe-art`, pinned in requirements.txt) through
`art.ServerlessBackend(base_url=..., api_key=...)`: register, rollouts through
`model.openai_client()` (latest and pinned names, tools, logprobs), `art.gather_trajectory_groups`,
`backend.train` followed through the events endpoint, `model.log`, checkpoint listing and
deletion, SFT jobs through ART's client, `PipelineTrainer`, and the model's deletion.

It prints progress on stderr and, as its last stdout line, one JSON summary that
test/art/art.test.ts asserts on: the facts each step observed, plus `checks` (name -> ok/detail)
for what ART expects of each answer. A step that raises is recorded as a failed check with the
exception, and the script goes on with the next step, so one mismatch does not hide the others.

Usage: python art_script.py BASE_URL API_KEY WORK_DIR SFT_DIR
(WORK_DIR: ART's `.art` directory; SFT_DIR: where the file:// SFT step writes its JSONL, a folder
the service may read, test/art/art.test.ts uses the service's data directory.)
"""

from __future__ import annotations

import asyncio
import base64
import importlib.metadata
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

# No W&B account: ART's wandb paths must stay off (no WANDB_API_KEY, disabled SDK).
os.environ["WANDB_MODE"] = "disabled"
os.environ.pop("WANDB_API_KEY", None)
os.environ.setdefault("WEAVE_DISABLED", "true")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of litellm's price list

import art  # noqa: E402
import openai  # noqa: E402
from art.pipeline_trainer import PipelineRuntimeConfig, PipelineTrainer  # noqa: E402

BASE_URL, API_KEY, WORK_DIR, SFT_DIR = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
PROJECT = "art-conformance"
RL_STEPS = 16
PROMPTS_PER_STEP = 8
GROUP_SIZE = 8
LEARNING_RATE = 5e-3  # the local engine's tuned rate (ART's default 5e-6 barely moves it)

summary: dict[str, Any] = {"art_version": importlib.metadata.version("openpipe-art"), "checks": {}}


def note(message: str) -> None:
    print(f"[art_script {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def check(name: str, ok: bool, detail: Any = None) -> None:
    summary["checks"][name] = {"ok": bool(ok), "detail": detail}
    note(f"{'ok  ' if ok else 'FAIL'} {name}{'' if detail is None else f': {detail}'}")


async def step(name: str, body) -> Any:
    """Runs one step; an exception becomes a failed check named after the step."""
    try:
        return await body()
    except Exception as error:  # noqa: BLE001 - every failure is reported, none hidden
        check(name, False, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=6)}")
        return None


# ---------------------------------------------------------------- the task (tests/engine's)
ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def words(seed: int, count: int) -> list[str]:
    """Deterministic 4-letter lowercase words (a small LCG; any words do)."""
    state = seed * 7919 + 17
    out = []
    for _ in range(count):
        word = ""
        for _ in range(4):
            state = (state * 1103515245 + 12345) % 2**31
            word += ALPHABET[state % 26]
        out.append(word)
    return out


def capitals_reward(text: str | None) -> float:
    """Fraction of characters that are capital letters A-Z: a fresh tiny model climbs it with RL
    (test/engine/service-rl.test.ts asserts +0.3 in 16 steps of 8 prompts x 8 samples)."""
    text = text or ""
    return sum("A" <= c <= "Z" for c in text) / len(text) if text else 0.0


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


async def main() -> None:
    backend = art.ServerlessBackend(base_url=BASE_URL, api_key=API_KEY)
    model = art.TrainableModel(
        name="capitals",
        run_name="capitals-run",
        project=PROJECT,
        base_model="policyloop/tiny-chat",
        base_path=str(WORK_DIR / ".art"),
    )

    # ------------------------------------------------------------ register (get-or-create)
    async def register():
        await model.register(backend)
        first_id = model.id
        again = art.TrainableModel(
            name="capitals", run_name="capitals-run", project=PROJECT, base_model="policyloop/tiny-chat",
            base_path=str(WORK_DIR / ".art"),
        )
        await again.register(backend)
        summary["register"] = {
            "id": model.id, "entity": model.entity, "run_id": model.run_id,
            "inference_base_url": model.inference_base_url, "inference_name": model.get_inference_name(),
            "same_id_again": again.id == first_id,
        }
        check("register", model.id is not None and model.entity is not None and again.id == first_id, summary["register"])

    await step("register", register)
    if model.id is None:
        return
    client = model.openai_client()

    # ------------------------------------------------------------ inference through ART's client
    async def inference():
        response = await client.chat.completions.create(
            model=model.get_inference_name(), messages=[{"role": "user", "content": "abcd"}],
            max_tokens=6, temperature=1, logprobs=True, n=2,
        )
        choice = response.choices[0]
        tokens = [item.token for item in (choice.logprobs.content if choice.logprobs else [])]
        summary["inference"] = {
            "model": response.model, "choices": len(response.choices), "finish_reason": choice.finish_reason,
            "tokens": tokens[:3], "all_token_ids": all(t.startswith("token_id:") for t in tokens),
            "logprobs_finite": all(item.logprob <= 0 for item in choice.logprobs.content) if choice.logprobs else False,
        }
        check("inference latest name, n=2, logprobs", len(response.choices) == 2 and bool(tokens), summary["inference"])

        step0 = await client.chat.completions.create(
            model=model.get_inference_name(step=0), messages=[{"role": "user", "content": "abcd"}], max_tokens=4,
        )
        check("inference pinned :step0", bool(step0.choices), model.get_inference_name(step=0))

        try:
            await client.chat.completions.create(
                model=model.get_inference_name(step=99), messages=[{"role": "user", "content": "abcd"}], max_tokens=4,
            )
            check("inference unknown step is a 404", False, "no error")
        except openai.NotFoundError as error:
            check("inference unknown step is a 404", error.status_code == 404, str(error)[:300])

        # Tools: a function tool offered; the tiny model answers text (it was never taught calls).
        tools = [{"type": "function", "function": {"name": "shout", "description": "Uppercase a word",
                  "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}}]
        with_tools = await client.chat.completions.create(
            model=model.get_inference_name(), messages=[{"role": "user", "content": "abcd"}], tools=tools,
            tool_choice="auto", max_tokens=6, logprobs=True,
        )
        check("inference with tools", bool(with_tools.choices) and with_tools.choices[0].logprobs is not None,
              {"finish_reason": with_tools.choices[0].finish_reason})

    await step("inference", inference)

    # ------------------------------------------------------------ RL: gather, log, train
    tools_for_trajectories = [{"type": "function", "function": {"name": "shout", "parameters": {"type": "object", "properties": {}}}}]

    async def rollout(word: str, with_tools: bool) -> art.Trajectory:
        messages: art.Messages = [{"role": "user", "content": word}]
        response = await client.chat.completions.create(
            model=model.get_inference_name(), messages=messages, max_tokens=6, temperature=1, logprobs=True,
            **({"tools": tools_for_trajectories} if with_tools else {}),
        )
        choice = response.choices[0]
        return art.Trajectory(
            messages_and_choices=[*messages, choice],
            tools=tools_for_trajectories if with_tools else None,
            reward=capitals_reward(choice.message.content),
            metrics={"length": len(choice.message.content or "")},
        )

    train_means: list[float] = []
    train_results: list[dict[str, Any]] = []

    async def rl():
        for index in range(1, RL_STEPS + 1):
            prompts = words(index, PROMPTS_PER_STEP)
            groups = await art.gather_trajectory_groups(
                (art.TrajectoryGroup(rollout(word, with_tools=(index == 1 and g == 0)) for _ in range(GROUP_SIZE))
                 for g, word in enumerate(prompts)),
                pbar_desc=None,
            )
            rewards = [t.reward for group in groups for t in group.trajectories]
            train_means.append(mean(rewards))
            await model.log(groups, split="train")
            result = await backend.train(model, groups, learning_rate=LEARNING_RATE, loss_fn="cispo")
            train_results.append({"step": result.step, "metrics": result.metrics})
            note(f"RL step {index}: mean reward {train_means[-1]:.3f} -> checkpoint step {result.step}")
        first = (train_means[0] + train_means[1]) / 2
        last = (train_means[-1] + train_means[-2]) / 2
        summary["rl"] = {
            "means": train_means, "first": first, "last": last,
            "steps": [r["step"] for r in train_results],
            "metric_names": sorted(train_results[-1]["metrics"]),
            "last_metrics": train_results[-1]["metrics"],
        }
        check("backend.train returns consecutive steps", [r["step"] for r in train_results] == list(range(1, RL_STEPS + 1)),
              summary["rl"]["steps"])
        check("reward moves (+0.3 as the engine's learning test)", last - first >= 0.3, {"first": first, "last": last})

    await step("rl", rl)

    # ------------------------------------------------------------ val log and the step read back
    async def validation():
        current = await model.get_step()
        val_groups = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(rollout(word, with_tools=False) for _ in range(2)) for word in words(99, 8)),
            pbar_desc=None,
        )
        await model.log(val_groups, split="val")
        # ART keeps metrics in <base_path>/<project>/models/<run_name>/history.jsonl
        history_path = Path(model.base_path) / PROJECT / "models" / "capitals-run" / "history.jsonl"
        history = [json.loads(line) for line in history_path.read_text().splitlines()] if history_path.exists() else []
        val_rows = [row for row in history if "val/reward" in row]
        train_rows = [row for row in history if "train/reward" in row]
        summary["log"] = {"step": current, "val_rows": len(val_rows), "train_rows": len(train_rows),
                          "val_reward": val_rows[-1]["val/reward"] if val_rows else None}
        check("get_step reads the latest checkpoint", current == len(train_results), {"step": current})
        check("model.log writes train and val rows", len(val_rows) == 1 and len(train_rows) >= len(train_results), summary["log"])

        # ART's client also has the service-side log route (model.log in this release keeps metrics
        # locally): send ART's own serialization of the groups to it.
        await backend._client.models.log(model_id=model.id, trajectory_groups=val_groups, split="val")
        check("client.models.log accepts ART's trajectory groups", True)

        # A pinned inference name inside ART's adapter lease
        async with backend.adapter_lease(model, 1):
            pinned = model.get_inference_name()
            response = await client.chat.completions.create(model=pinned, messages=[{"role": "user", "content": "abcd"}], max_tokens=4)
        check("inference inside adapter_lease uses :step1", pinned.endswith(":step1") and bool(response.choices), pinned)

    await step("validation", validation)

    # ------------------------------------------------------------ checkpoints: list, delete
    async def checkpoints():
        listed = [c async for c in backend._client.models.checkpoints.list(model_id=model.id, limit=5)]
        steps = [c.step for c in listed]
        check("checkpoints list pages through every step, ascending", steps == list(range(1, len(train_results) + 1)), steps)
        check("checkpoints carry ids and metric maps", all(c.id and isinstance(c.metrics, dict) for c in listed))
        await model.delete_checkpoints(best_checkpoint_metric="train/reward")
        kept = [c.step async for c in backend._client.models.checkpoints.list(model_id=model.id)]
        summary["checkpoints"] = {"before": steps, "kept": kept}
        check("delete_checkpoints keeps the latest and the best", len(kept) in (1, 2) and max(steps) in kept, summary["checkpoints"])
        result = await backend._client.models.checkpoints.delete(model_id=model.id, steps=[12345])
        check("checkpoint delete reports unknown steps", result.deleted_count == 0 and result.not_found_steps == [12345],
              result.model_dump())
        check("step unchanged after deletion", await model.get_step() == max(steps))

    await step("checkpoints", checkpoints)

    # ------------------------------------------------------------ SFT
    async def sft():
        sft_model = art.TrainableModel(name="uppercase-sft", run_name="uppercase-sft", project=PROJECT,
                                       base_model="policyloop/tiny-chat", base_path=str(WORK_DIR / ".art"))
        await sft_model.register(backend)
        rows = [{"messages": [{"role": "user", "content": w}, {"role": "assistant", "content": w.upper()}]} for w in words(7, 64)]
        jsonl = "".join(json.dumps(row) + "\n" for row in rows)

        # 1. ART's public model.train_sft uploads the rows as a W&B artifact first: without W&B it stops.
        trajectories = [art.Trajectory(messages_and_choices=row["messages"], reward=0.0) for row in rows[:4]]
        try:
            await sft_model.train_sft(trajectories, art.TrainSFTConfig(learning_rate=5e-3, batch_size=16))
            check("model.train_sft without W&B", False, "succeeded unexpectedly")
        except Exception as error:  # noqa: BLE001
            summary["train_sft_error"] = f"{type(error).__name__}: {error}"[:300]
            check("model.train_sft without W&B stops before any job", await sft_model.get_step() == 0, summary["train_sft_error"])

        # 2. The job route ART's train_sft calls, with the config it builds, on URLs we can read.
        async def run_sft(url: str) -> dict[str, Any]:
            config = {"batch_size": 16, "learning_rate": 5e-3, "assistant_turns": "all",
                      "metric_logging": {"enabled": True, "target_training_step": (await sft_model.get_step()) + 1}}
            job = await backend._client.sft_training_jobs.create(model_id=sft_model.id, training_data_url=url, config=config)
            return await follow_events(backend._client.sft_training_jobs.events, job.id)

        data_url = "data:application/jsonl;base64," + base64.b64encode(jsonl.encode()).decode()
        by_data = await run_sft(data_url)
        check("SFT job from a data: URL", by_data["ended"] and by_data["gradient_steps"] == 4, by_data)
        path = SFT_DIR / "uppercase.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(jsonl)
        by_file = await run_sft(path.as_uri())
        check("SFT job from a file:// URL", by_file["ended"] and by_file["gradient_steps"] == 4, by_file)
        check("SFT steps count as checkpoints", await sft_model.get_step() == 2)

        # 3. What ART's train_sft would send: a wandb-artifact:// URL, refused with a clear reason.
        try:
            await backend._client.sft_training_jobs.create(
                model_id=sft_model.id, training_data_url=f"wandb-artifact:///{sft_model.entity}/{PROJECT}/data:v0", config={})
            check("SFT from wandb-artifact:// is refused", False, "accepted")
        except openai.UnprocessableEntityError as error:
            check("SFT from wandb-artifact:// is refused", "wandb-artifact" in str(error), str(error)[:400])
        await backend.delete(sft_model)

    await step("sft", sft)

    # ------------------------------------------------------------ PipelineTrainer
    async def pipeline():
        summary["pipeline_local_backend_stand_in"] = stand_in_for_art_local()
        pipe_model = art.TrainableModel(name="capitals-pipeline", run_name="capitals-pipeline", project=PROJECT,
                                        base_model="policyloop/tiny-chat", base_path=str(WORK_DIR / ".art"))
        await pipe_model.register(backend)
        pipe_client = pipe_model.openai_client()
        eval_steps: list[int] = []

        async def rollout_fn(m: art.TrainableModel, word: str, _config: None) -> art.TrajectoryGroup:
            response = await pipe_client.chat.completions.create(
                model=m.get_inference_name(), messages=[{"role": "user", "content": word}], max_tokens=6,
                temperature=1, logprobs=True, n=GROUP_SIZE)
            return art.TrajectoryGroup(
                art.Trajectory(messages_and_choices=[{"role": "user", "content": word}, choice],
                               reward=capitals_reward(choice.message.content))
                for choice in response.choices)

        async def eval_fn(m: art.TrainableModel, at_step: int, _config: None) -> list[art.Trajectory]:
            eval_steps.append(at_step)
            response = await pipe_client.chat.completions.create(
                model=m.get_inference_name(at_step), messages=[{"role": "user", "content": "abcd"}], max_tokens=6, n=4)
            return [art.Trajectory(messages_and_choices=[{"role": "user", "content": "abcd"}, c],
                                   reward=capitals_reward(c.message.content)) for c in response.choices]

        trainer = PipelineTrainer(
            model=pipe_model, backend=backend, rollout_fn=rollout_fn, scenarios=words(500, 200), config=None,
            eval_fn=eval_fn, learning_rate=LEARNING_RATE, loss_fn="cispo", max_steps=3, eval_every_n_steps=2,
            eval_at_start=False, log_interval_seconds=3600, resume=False,
            pipeline=PipelineRuntimeConfig(num_rollout_workers=4, min_batch_size=4, max_batch_size=4),
        )
        await asyncio.wait_for(trainer.train(handle_signals=False), timeout=600)
        final = await pipe_model.get_step()
        completed = sorted(trainer.state.completed_eval_steps)
        summary["pipeline"] = {"step": final, "eval_steps": eval_steps, "completed_eval_steps": completed}
        check("PipelineTrainer trains 3 steps", final == 3, summary["pipeline"])
        # An eval that raises is only printed by the trainer: it must have completed at each step
        # (it needs policy_token_spans on every choice, pinned to the evaluated step).
        check("PipelineTrainer evaluations complete", eval_steps and completed == sorted(eval_steps), summary["pipeline"])
        await backend.delete(pipe_model)

    await step("pipeline", pipeline)

    # ------------------------------------------------------------ more of what ART sends
    async def extras():
        extra = art.TrainableModel(name="extras", run_name="extras", project=PROJECT,
                                   base_model="policyloop/tiny-chat", base_path=str(WORK_DIR / ".art"))
        await extra.register(backend)
        extra_client = extra.openai_client()
        tools = [{"type": "function", "function": {"name": "shout", "description": "Uppercase a word",
                  "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}}]
        # A tool-call history: assistant tool call, tool result, then the sampled answer.
        history: art.Messages = [
            {"role": "system", "content": "Answer in capitals."},
            {"role": "user", "content": "abcd"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "shout", "arguments": "{\"word\": \"abcd\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ABCD"},
        ]

        # Rewards 0, 1, 2, ... in each group: these steps check what is sent, not learning, and a
        # group whose rewards are all equal trains nothing (the job would fail, rightly).
        async def tool_rollout(reward: float) -> art.Trajectory:
            response = await extra_client.chat.completions.create(
                model=extra.get_inference_name(), messages=history, tools=tools, max_tokens=6, temperature=1, logprobs=True)
            choice = response.choices[0]
            return art.Trajectory(messages_and_choices=[*history, choice], tools=tools, reward=reward)

        groups = await art.gather_trajectory_groups([art.TrajectoryGroup(tool_rollout(i) for i in range(6))], pbar_desc=None)
        result = await backend.train(extra, groups, learning_rate=LEARNING_RATE, loss_fn="ppo", epsilon=0.2)
        check("tool-call history trains with loss_fn='ppo'", result.step == 1, {"step": result.step})

        # Without logprobs ART trains only with allow_training_without_logprobs.
        async def plain_rollout(word: str, reward: float) -> art.Trajectory:
            response = await extra_client.chat.completions.create(
                model=extra.get_inference_name(), messages=[{"role": "user", "content": word}], max_tokens=6, temperature=1)
            choice = response.choices[0]
            return art.Trajectory(messages_and_choices=[{"role": "user", "content": word}, choice], reward=reward)

        plain = await art.gather_trajectory_groups(
            (art.TrajectoryGroup(plain_rollout(w, i) for i in range(4)) for w in words(3, 2)), pbar_desc=None)
        try:
            await backend.train(extra, plain, learning_rate=LEARNING_RATE)
            check("no logprobs: the job fails, saying why", False, "trained")
        except RuntimeError as error:
            check("no logprobs: the job fails, saying why", "logprob" in str(error).lower(), str(error)[:300])
        result = await backend.train(extra, plain, learning_rate=LEARNING_RATE, allow_training_without_logprobs=True)
        check("no logprobs with allow_training_without_logprobs trains", result.step == 2, {"step": result.step})

        # A rollout that raises: gather keeps it as the group's exception (max_exceptions), which ART sends.
        async def failing() -> art.Trajectory:
            raise ValueError("the environment broke")

        with_exception = await art.gather_trajectory_groups(
            [art.TrajectoryGroup([tool_rollout(0), tool_rollout(1), tool_rollout(2), failing()])],
            pbar_desc=None, max_exceptions=1)
        sent = with_exception[0].model_dump(mode="json")
        result = await backend.train(extra, with_exception, learning_rate=LEARNING_RATE)
        check("a group with an exception trains", result.step == 3 and len(sent["exceptions"]) == 1,
              {"step": result.step, "exceptions": sent["exceptions"][:1]})
        await backend.delete(extra)

    await step("extras", extras)

    # ------------------------------------------------------------ errors ART sees
    async def errors():
        intruder = art.ServerlessBackend(base_url=BASE_URL, api_key="not-a-key")
        try:
            await intruder._client.models.create(project=PROJECT, name="x", base_model="policyloop/tiny-chat")
            check("a wrong key is a 401", False, "accepted")
        except openai.AuthenticationError as error:
            check("a wrong key is a 401", error.status_code == 401, str(error)[:200])
        finally:
            await intruder.close()
        try:
            await backend._client.training_jobs.create(model_id=model.id, trajectory_groups=[], experimental_config={"learning_rate": "fast"})
            check("invalid training job is a 422", False, "accepted")
        except openai.UnprocessableEntityError as error:
            summary["error_422_body"] = error.body
            check("invalid training job is a 422", error.status_code == 422, str(error)[:300])
        try:
            await backend._client.models.checkpoints.delete(model_id="00000000-0000-4000-8000-000000000000", steps=[1])
            check("unknown model is a 404", False, "no error")
        except openai.NotFoundError as error:
            check("unknown model is a 404", error.status_code == 404, str(error)[:200])

    await step("errors", errors)

    # ------------------------------------------------------------ delete the model
    async def delete():
        await backend.delete(model)
        try:
            await client.chat.completions.create(model=model.get_inference_name(), messages=[{"role": "user", "content": "x"}], max_tokens=2)
            gone = False
        except openai.NotFoundError:
            gone = True
        check("backend.delete removes the model and its inference name", gone)

    await step("delete", delete)
    await backend.close()


def stand_in_for_art_local() -> bool:
    """PipelineTrainer imports `art.local.backend` (which imports torch) only to ask whether the
    backend is a LocalBackend. Installing torch from PyPI brings gigabytes of CUDA wheels, so without
    torch that one module is replaced by a stand-in class nothing is an instance of; ART's code runs
    unchanged. Returns whether the stand-in was needed (docs/art.md says so for users)."""
    import importlib.util
    import types

    if importlib.util.find_spec("torch") is not None:
        return False
    module = types.ModuleType("art.local.backend")

    class LocalBackend:  # the ServerlessBackend is not one
        pass

    module.LocalBackend = LocalBackend
    sys.modules["art.local.backend"] = module
    return True


async def follow_events(events, job_id: str) -> dict[str, Any]:
    """Follows a job's events the way ServerlessBackend does (after=<last id>, 1 s apart)."""
    after = None
    seen: dict[str, Any] = {"ended": False, "gradient_steps": 0, "num_sequences": None, "failed": None}
    for _ in range(600):
        await asyncio.sleep(1)
        async for event in events.list(training_job_id=job_id, **({"after": after} if after else {})):
            after = event.id
            if event.type == "training_started":
                seen["num_sequences"] = event.data["num_sequences"]
            elif event.type == "gradient_step":
                {k: float(v) for k, v in event.data.items()}  # ART's own conversion: numbers only
                seen["gradient_steps"] += 1
            elif event.type == "training_ended":
                seen["ended"] = True
                return seen
            elif event.type == "training_failed":
                seen["failed"] = event.data.get("error_message")
                return seen
    return seen


if __name__ == "__main__":
    started = time.monotonic()
    try:
        asyncio.run(main())
    except Exception as error:  # noqa: BLE001
        check("script", False, f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
    summary["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary, default=str))
