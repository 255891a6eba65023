#!/usr/bin/env python3
"""Reference fixtures for the real-model engine, written by torch, transformers and peft.

Modes (run with the venv of this folder, see README.md):

  generate.py [fixtures]                 writes test/fixtures/reference/ (seeded, deterministic)
  generate.py logits MODEL_DIR OUT.json [--prompts JSON | --prompts-file FILE]
  generate.py check-adapter BASE_DIR ADAPTER_DIR OUT.json [--prompts JSON | --prompts-file FILE]

`logits` writes transformers' float32 logits of any model folder; `check-adapter` loads an adapter
folder (for example one our engine exported) with `PeftModel.from_pretrained`, fails unless every
LoRA tensor of the model came from the folder, and writes the PeftModel's logits. Without prompts
both use the prompts of the committed logits fixture. Paths may be relative to the caller's folder.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import shutil
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything is local; never ask the Hub

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "test" / "fixtures" / "reference"

VOCAB = 320
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PAD_ID, BOS_ID, EOS_ID = 0, 0, 2
IM_START_ID = 1

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

TOKENIZER_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! Hello there, how are you today?",
    "user: what is the weather in Paris? assistant: it is sunny.",
    "def add(a, b):\n    return a + b\n",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "the cat sat on the mat and the dog sat on the log",
    "Reinforcement learning trains a policy with rewards.",
] * 4

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LORA_R, LORA_ALPHA = 4, 8

LOSS_FORMULA = (
    "loss = -sum_b sum_{t>=1} mask[b][t] * weights[b][t] * log p(input_ids[b][t] | input_ids[b][<t])"
    " / sum_b sum_{t>=1} mask[b][t]"
)


# --------------------------------------------------------------------------------------------
# helpers


def fmt(values) -> list:
    """float32 values as JSON numbers that round-trip to the same float32 (9 significant digits)."""
    array = np.asarray(values, dtype=np.float32)
    if array.ndim == 0:
        return float(f"{float(array):.9g}")
    return [fmt(row) for row in array] if array.ndim > 1 else [float(f"{float(v):.9g}") for v in array]


def versions() -> dict:
    import peft
    import safetensors
    import tokenizers
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "safetensors": safetensors.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
    }


def deterministic() -> None:
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)


def load_model(path: Path, dtype=torch.float32, attn: str = "eager"):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, attn_implementation=attn)
    model.eval()
    return model


@torch.no_grad()
def logits_of(model, ids: list[int]) -> torch.Tensor:
    """Logits [len(ids), vocab] of one unpadded sequence, all positions, float32."""
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].float()


def prompt_entries(model, prompts: list[dict]) -> list[dict]:
    entries = []
    for prompt in prompts:
        entry = {key: value for key, value in prompt.items()}
        entry["logits"] = fmt(logits_of(model, prompt["ids"]).numpy())
        entries.append(entry)
    return entries


def read_prompts(args) -> list[dict]:
    if args.prompts is not None:
        raw = json.loads(args.prompts)
    elif args.prompts_file is not None:
        raw = json.loads(Path(args.prompts_file).read_text())
    else:
        fixture = json.loads((OUT / "logits.json").read_text())
        first = next(iter(fixture["models"].values()))
        return [{"name": p["name"], "ids": p["ids"]} for p in first["prompts"]]
    if not isinstance(raw, list) or not all(isinstance(p, list) and p for p in raw):
        sys.exit(f"Expected --prompts to be a JSON list of non-empty token id lists, got {raw!r:.200}")
    return [{"name": f"prompt-{i}", "ids": [int(t) for t in p]} for i, p in enumerate(raw)]


# --------------------------------------------------------------------------------------------
# fixture models


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TOKENIZER_CORPUS, trainer=trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    for index, special in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(special) == index
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )


def model_specs() -> list[dict]:
    common = dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
    )
    return [
        dict(
            name="llama-tied",
            arch="llama",
            seed=1001,
            dtype=torch.float32,
            config=dict(
                common,
                max_position_embeddings=512,
                tie_word_embeddings=True,
                rope_parameters=dict(
                    rope_type="llama3",
                    rope_theta=500000.0,
                    factor=8.0,
                    low_freq_factor=1.0,
                    high_freq_factor=4.0,
                    original_max_position_embeddings=64,
                ),
            ),
            # config.json in the form the Hub's Llama 3.2 files have (rope_theta + rope_scaling)
            legacy_rope=True,
            shard=None,
            generation=dict(bos_token_id=BOS_ID, eos_token_id=[EOS_ID, PAD_ID], do_sample=True, temperature=0.6, top_p=0.9),
        ),
        dict(
            name="llama-untied",
            arch="llama",
            seed=1002,
            dtype=torch.bfloat16,
            config=dict(
                common,
                rms_norm_eps=1e-5,
                max_position_embeddings=256,
                tie_word_embeddings=False,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0),
            ),
            legacy_rope=False,
            shard=None,
            generation=dict(bos_token_id=BOS_ID, eos_token_id=EOS_ID),
        ),
        dict(
            name="qwen3-tied",
            arch="qwen3",
            seed=1003,
            dtype=torch.float32,
            config=dict(
                common,
                head_dim=32,
                max_position_embeddings=1024,
                tie_word_embeddings=True,
                rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
            ),
            # config.json in the form the Hub's Qwen3 files have (rope_theta + rope_scaling null)
            legacy_rope=True,
            shard=None,
            generation=dict(
                bos_token_id=PAD_ID,
                eos_token_id=[EOS_ID, PAD_ID],
                pad_token_id=PAD_ID,
                do_sample=True,
                temperature=0.6,
                top_p=0.95,
                top_k=20,
            ),
        ),
        dict(
            name="qwen3-untied",
            arch="qwen3",
            seed=1004,
            dtype=torch.float16,
            config=dict(
                common,
                head_dim=24,
                num_attention_heads=6,
                max_position_embeddings=1024,
                tie_word_embeddings=False,
                rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
            ),
            legacy_rope=False,
            shard="100KB",
            generation=dict(bos_token_id=PAD_ID, eos_token_id=[EOS_ID, PAD_ID], pad_token_id=PAD_ID),
        ),
    ]


@torch.no_grad()
def init_weights(model, seed: int, dtype) -> None:
    """Non-trivial random weights: N(0, 0.2) matrices, N(0, 0.3) embeddings, norms U(0.5, 1.5).

    Values are rounded to the dtype the folder stores, so the float32 model computes on exactly the
    numbers a reader of the files gets."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        if name.endswith("norm.weight"):
            value = torch.rand(param.shape, generator=generator) + 0.5
        elif "embed_tokens" in name:
            value = torch.randn(param.shape, generator=generator) * 0.3
        else:
            value = torch.randn(param.shape, generator=generator) * 0.2
        param.copy_(value.to(dtype).to(torch.float32))


def write_legacy_rope(config_path: Path) -> None:
    """Rewrites transformers 5's `rope_parameters` as the Hub's `rope_theta` + `rope_scaling`."""
    config = json.loads(config_path.read_text())
    rope = dict(config.pop("rope_parameters"))
    config["rope_theta"] = rope.pop("rope_theta")
    config["rope_scaling"] = rope if rope.get("rope_type", "default") != "default" else None
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def write_tokenizer_config(folder: Path, spec: dict) -> None:
    """tokenizer_config.json as the Hub's files have it: a class every reader knows, and for the
    `legacy_rope` folders the chat template inside it (the others keep transformers 5's
    chat_template.jinja beside it)."""
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["model_max_length"] = spec["config"]["max_position_embeddings"]
    config["bos_token"] = None
    template = folder / "chat_template.jinja"
    if spec["legacy_rope"]:
        config["chat_template"] = template.read_text()
        template.unlink()
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def check_tokenizer(folder: Path, prompts: list[dict]) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    for prompt in prompts:
        if "text" in prompt:
            assert tokenizer(prompt["text"], add_special_tokens=False)["input_ids"] == prompt["ids"], folder
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hello world!"}], tokenize=False, add_generation_prompt=True
    )
    assert rendered == "<|im_start|>user\nHello world!<|im_end|>\n<|im_start|>assistant\n", rendered


def make_model(spec: dict, tokenizer) -> Path:
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    config_class, model_class = (
        (LlamaConfig, LlamaForCausalLM) if spec["arch"] == "llama" else (Qwen3Config, Qwen3ForCausalLM)
    )
    config = config_class(**spec["config"])
    torch.manual_seed(spec["seed"])
    model = model_class(config).float()
    init_weights(model, spec["seed"], spec["dtype"])
    if config.tie_word_embeddings:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model.generation_config = GenerationConfig(**spec["generation"])

    folder = OUT / spec["name"]
    if folder.exists():
        shutil.rmtree(folder)
    to_save = model.to(spec["dtype"])
    kwargs = {"max_shard_size": spec["shard"]} if spec["shard"] else {}
    to_save.save_pretrained(str(folder), **kwargs)
    tokenizer.save_pretrained(str(folder))
    write_tokenizer_config(folder, spec)
    if spec["legacy_rope"]:
        write_legacy_rope(folder / "config.json")
    else:
        # stable key order for readable diffs
        path = folder / "config.json"
        path.write_text(json.dumps(json.loads(path.read_text()), indent=2, sort_keys=True) + "\n")
    # the reloaded config means what we built
    reloaded = load_model(folder)
    expected = spec["config"]["rope_parameters"]
    for key, value in expected.items():
        assert reloaded.config.rope_parameters.get(key) == value, (spec["name"], key, reloaded.config.rope_parameters)
    return folder


def make_prompts(tokenizer) -> list[dict]:
    generator = np.random.default_rng(7)
    prompts = [
        {"name": "one-token", "ids": [5]},
        {"name": "three-tokens", "ids": [0, 17, 300]},
        {"name": "random-7", "ids": generator.integers(0, VOCAB, 7).tolist()},
        {"name": "random-12", "ids": generator.integers(0, VOCAB, 12).tolist()},
        {"name": "repeated-token", "ids": [42] * 6},
    ]
    text = "<|im_start|>user\nHello world!<|im_end|>\n<|im_start|>assistant\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    prompts.append({"name": "chat-text", "text": text, "ids": list(ids)})
    for prompt in prompts:
        prompt["ids"] = [int(t) for t in prompt["ids"]]
        assert 1 <= len(prompt["ids"]) <= 24, prompt
    return prompts


# --------------------------------------------------------------------------------------------
# intermediate values, to find where a mismatching forward pass goes wrong


@torch.no_grad()
def intermediates(model, prompt: dict) -> dict:
    """Hidden states of one prompt after the embedding, after each decoder layer and after the final
    norm (forward hooks), and the rotary inverse frequencies the model uses."""
    captured: dict[str, torch.Tensor] = {}

    def keep(name):
        def hook(_module, _inputs, output):
            captured[name] = (output[0] if isinstance(output, tuple) else output)[0].float().clone()

        return hook

    inner = model.model
    handles = [inner.embed_tokens.register_forward_hook(keep("embeddings"))]
    handles += [layer.register_forward_hook(keep(f"layer{i}")) for i, layer in enumerate(inner.layers)]
    handles.append(inner.norm.register_forward_hook(keep("final_norm")))
    try:
        logits_of(model, prompt["ids"])
    finally:
        for handle in handles:
            handle.remove()
    return {
        "prompt": prompt["name"],
        "ids": prompt["ids"],
        "rope_inv_freq": fmt(inner.rotary_emb.inv_freq.float().numpy()),
        "rope_attention_scaling": float(inner.rotary_emb.attention_scaling),
        "embeddings": fmt(captured["embeddings"].numpy()),
        "layers": [fmt(captured[f"layer{i}"].numpy()) for i in range(len(inner.layers))],
        "final_norm": fmt(captured["final_norm"].numpy()),
    }


# --------------------------------------------------------------------------------------------
# observed float32 tolerances


@torch.no_grad()
def observed_differences(folder: Path, prompts: list[dict]) -> dict:
    """Max |difference| of logits between ways of computing the same float32 forward."""
    eager = load_model(folder)
    reference = {p["name"]: logits_of(eager, p["ids"]) for p in prompts}

    def worst(other: dict) -> float:
        return max(float((other[n] - reference[n]).abs().max()) for n in reference)

    sdpa = load_model(folder, attn="sdpa")
    found = {"sdpa_vs_eager": worst({p["name"]: logits_of(sdpa, p["ids"]) for p in prompts})}

    torch.set_num_threads(2)
    found["two_threads_vs_one"] = worst({p["name"]: logits_of(eager, p["ids"]) for p in prompts})
    torch.set_num_threads(1)

    incremental = {}
    for p in prompts:
        past, rows = None, []
        for token in p["ids"]:
            out = eager(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            rows.append(out.logits[0, -1])
        incremental[p["name"]] = torch.stack(rows)
    found["kv_cache_vs_full"] = worst(incremental)

    double = load_model(folder, dtype=torch.float64)
    found["float32_vs_float64"] = worst(
        {p["name"]: logits_of(double, p["ids"]).float() for p in prompts}
    )
    return {key: float(f"{value:.3g}") for key, value in found.items()}


# --------------------------------------------------------------------------------------------
# LoRA


def lora_batch(prompts_seed: int) -> dict:
    generator = np.random.default_rng(prompts_seed)
    lengths = [10, 7]
    width = max(lengths)
    input_ids, attention, mask, weights = [], [], [], []
    for row, length in enumerate(lengths):
        ids = generator.integers(3, VOCAB, length).tolist()
        prompt_len = 4 if row == 0 else 3
        m = [0] * prompt_len + [1] * (length - prompt_len)
        w = [0.0] * prompt_len + [float(round(v, 2)) for v in generator.uniform(-2, 2, length - prompt_len)]
        pad = width - length
        input_ids.append(ids + [PAD_ID] * pad)
        attention.append([1] * length + [0] * pad)
        mask.append(m + [0] * pad)
        weights.append(w + [0.0] * pad)
    return {"input_ids": input_ids, "attention_mask": attention, "lengths": lengths, "mask": mask, "weights": weights}


def batch_loss(model, batch: dict):
    ids = torch.tensor(batch["input_ids"], dtype=torch.long)
    attention = torch.tensor(batch["attention_mask"], dtype=torch.long)
    mask = torch.tensor(batch["mask"], dtype=torch.float32)
    weights = torch.tensor(batch["weights"], dtype=torch.float32)
    logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits.float()
    logprobs = torch.log_softmax(logits[:, :-1], dim=-1)
    token_logprobs = logprobs.gather(-1, ids[:, 1:, None])[..., 0]  # [B, T-1]: log p(x_t | x_<t), t >= 1
    target_mask, target_weights = mask[:, 1:], weights[:, 1:]
    loss = -(target_mask * target_weights * token_logprobs).sum() / target_mask.sum()
    return loss, token_logprobs


def saved_name(parameter_name: str) -> str:
    """PEFT's in-memory name -> the name save_pretrained writes (adapter name dropped)."""
    return parameter_name.replace(".default.", ".")


def make_lora(spec: dict, folder: Path, prompts: list[dict]) -> dict:
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file, save_file

    base = load_model(folder)
    config = LoraConfig(
        r=LORA_R,
        lora_alpha=LORA_ALPHA,
        target_modules=LORA_TARGETS,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, config)
    generator = torch.Generator().manual_seed(spec["seed"] + 50000)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
            if ".lora_A." in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
            elif ".lora_B." in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)
    model.eval()

    root = OUT / "lora" / spec["name"]
    if root.exists():
        shutil.rmtree(root)
    adapter_dir = root / "adapter"
    model.save_pretrained(str(adapter_dir))
    readme = adapter_dir / "README.md"
    if readme.exists():
        readme.unlink()
    adapter_config = json.loads((adapter_dir / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = spec["name"]  # not this machine's path
    adapter_config["target_modules"] = sorted(adapter_config["target_modules"])  # a set in PEFT: hash order
    (adapter_dir / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2, sort_keys=True) + "\n")

    # logits of the PeftModel
    entries = prompt_entries(model, prompts)
    plain = load_model(folder)
    base_logits = {p["name"]: logits_of(plain, p["ids"]) for p in prompts}
    changed = min(float((torch.tensor(e["logits"]) - base_logits[e["name"]]).abs().max()) for e in entries)
    assert changed > 0.05, f"{spec['name']}: the adapter barely changes the logits ({changed})"

    # the adapter written loads back into PEFT with the same logits
    reloaded = PeftModel.from_pretrained(load_model(folder), str(adapter_dir))
    reloaded.eval()
    reload_diff = max(
        float((logits_of(reloaded, e["ids"]) - torch.tensor(e["logits"])).abs().max()) for e in entries
    )
    assert reload_diff < 1e-5, f"{spec['name']}: reloaded adapter differs by {reload_diff}"

    # loss and gradients on the fixed batch
    batch = lora_batch(spec["seed"])
    model.zero_grad()
    loss, token_logprobs = batch_loss(model, batch)
    loss.backward()
    lora_params = {n: p for n, p in model.named_parameters() if ".lora_" in n}
    assert all(not p.requires_grad for n, p in model.named_parameters() if ".lora_" not in n)
    grads = {saved_name(n): p.grad.detach().clone().contiguous() for n, p in lora_params.items()}
    stored = load_file(str(adapter_dir / "adapter_model.safetensors"))
    assert set(grads) == set(stored), (sorted(set(grads) ^ set(stored)))[:5]
    for name, grad in grads.items():
        assert grad.shape == stored[name].shape and float(grad.abs().max()) > 0, name
    save_file(dict(sorted(grads.items())), str(root / "grads.safetensors"), metadata={"format": "pt"})

    # the same gradients in float64: how far float32 is from exact
    double = copy.deepcopy(model).double()
    double.zero_grad()
    loss64, _ = batch_loss(double, batch)
    loss64.backward()
    grads64 = {saved_name(n): p.grad for n, p in double.named_parameters() if ".lora_" in n}
    grad_abs = max(float((grads[n].double() - g).abs().max()) for n, g in grads64.items())
    grad_rel = max(float((grads[n].double() - g).abs().max() / g.abs().max()) for n, g in grads64.items())
    loss_diff = abs(float(loss64) - float(loss))
    del double

    # the loss by hand, from the logits, agrees with the vectorised one
    with torch.no_grad():
        manual, count = 0.0, 0.0
        for b, row in enumerate(batch["input_ids"]):
            logits = logits_of(model, row[: batch["lengths"][b]]).double()
            for t in range(1, batch["lengths"][b]):
                if batch["mask"][b][t]:
                    lp = torch.log_softmax(logits[t - 1], -1)[row[t]]
                    manual += -batch["weights"][b][t] * float(lp)
                    count += 1
        assert abs(manual / count - float(loss)) < 1e-5, (manual / count, float(loss))

    logprob_rows = [[None] + fmt(row.detach().numpy())[: batch["lengths"][b] - 1] for b, row in enumerate(token_logprobs)]
    for b, row in enumerate(logprob_rows):
        row.extend([None] * (len(batch["input_ids"][b]) - len(row)))
    batch_json = {
        "base": spec["name"],
        "loss_formula": LOSS_FORMULA,
        "pad_id": PAD_ID,
        **batch,
        "loss": fmt(loss.detach().numpy()),
        "token_logprobs": logprob_rows,
        "grads_file": "grads.safetensors",
        "observed": {
            "loss_float32_vs_float64": float(f"{loss_diff:.3g}"),
            "grad_max_abs_float32_vs_float64": float(f"{grad_abs:.3g}"),
            "grad_max_abs_over_tensor_max_float32_vs_float64": float(f"{grad_rel:.3g}"),
            "grad_max_abs": float(f"{max(float(g.abs().max()) for g in grads.values()):.3g}"),
        },
    }

    # merging gives the same model
    merged = copy.deepcopy(model).merge_and_unload()
    merge_diff = max(
        float((logits_of(merged, e["ids"]) - torch.tensor(e["logits"])).abs().max()) for e in entries
    )
    assert merge_diff < 1e-4, f"{spec['name']}: merge_and_unload differs by {merge_diff}"

    lines = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in batch_json.items())
    (root / "batch.json").write_text("{\n" + lines + "\n}\n")
    (root / "logits.json").write_text(
        json.dumps(
            {
                "base": spec["name"],
                "adapter": "adapter",
                "vocab_size": VOCAB,
                "prompts": entries,
                "observed": {
                    "min_over_prompts_of_max_abs_change_vs_base": float(f"{changed:.3g}"),
                    "reloaded_adapter_vs_in_memory": float(f"{reload_diff:.3g}"),
                    "merge_and_unload_vs_peft": float(f"{merge_diff:.3g}"),
                },
            }
        )
        + "\n"
    )
    return {"changed": changed, "merge": merge_diff, "loss": float(loss), **batch_json["observed"]}


# --------------------------------------------------------------------------------------------
# modes


def generate_fixtures() -> None:
    deterministic()
    OUT.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    prompts = make_prompts(tokenizer)
    fixture = {
        "format": "policyloop reference logits v1",
        "generator": versions(),
        "layout": "models[name].prompts[i].logits[position][token]: float32 logits after ids[0..position]",
        "models": {},
        "observed": {},
    }
    debug = {
        "format": "policyloop reference intermediates v1",
        "layout": "models[name].{embeddings,final_norm,layers[i]}[position][hidden]: float32, one prompt",
        "models": {},
    }
    report = {}
    for spec in model_specs():
        folder = make_model(spec, tokenizer)
        check_tokenizer(folder, prompts)
        model = load_model(folder)
        fixture["models"][spec["name"]] = {
            "dir": spec["name"],
            "architecture": model.config.architectures[0],
            "vocab_size": model.config.vocab_size,
            "weights_dtype": str(spec["dtype"]).replace("torch.", ""),
            "prompts": prompt_entries(model, prompts),
        }
        debug["models"][spec["name"]] = intermediates(model, next(p for p in prompts if p["name"] == "random-7"))
        fixture["observed"][spec["name"]] = observed_differences(folder, prompts)
        report[spec["name"]] = {"observed": fixture["observed"][spec["name"]]}
        report[spec["name"]]["lora"] = make_lora(spec, folder, prompts)
    (OUT / "logits.json").write_text(json.dumps(fixture) + "\n")
    (OUT / "intermediates.json").write_text(json.dumps(debug) + "\n")
    print(json.dumps(report, indent=1))


def mode_logits(args) -> None:
    deterministic()
    prompts = read_prompts(args)
    model = load_model(Path(args.model_dir).resolve())
    out = {"model": str(args.model_dir), "generator": versions(), "prompts": prompt_entries(model, prompts)}
    Path(args.out).write_text(json.dumps(out) + "\n")


def mode_check_adapter(args) -> None:
    from peft import PeftModel
    from safetensors.torch import load_file

    deterministic()
    prompts = read_prompts(args)
    adapter_dir = Path(args.adapter_dir).resolve()
    model = PeftModel.from_pretrained(load_model(Path(args.base_dir).resolve()), str(adapter_dir))
    model.eval()
    stored = load_file(str(adapter_dir / "adapter_model.safetensors"))
    loaded = {saved_name(n): p for n, p in model.named_parameters() if ".lora_" in n}
    missing = sorted(set(loaded) - set(stored))
    unexpected = sorted(set(stored) - set(loaded))
    if missing or unexpected:
        sys.exit(
            f"Expected the adapter's tensors to be exactly the model's LoRA parameters; "
            f"missing from the file: {missing[:5]} ({len(missing)}), not used by PEFT: {unexpected[:5]} ({len(unexpected)})"
        )
    for name, tensor in stored.items():
        if not torch.equal(loaded[name].detach().float(), tensor.float()):
            sys.exit(f"Expected PEFT to hold the file's values for {name}; they differ")
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    out = {
        "base": str(args.base_dir),
        "adapter": str(args.adapter_dir),
        "generator": versions(),
        "adapter_config": {k: config.get(k) for k in ("r", "lora_alpha", "target_modules", "use_rslora")},
        "lora_tensors": len(stored),
        "prompts": prompt_entries(model, prompts),
    }
    Path(args.out).write_text(json.dumps(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode")
    sub.add_parser("fixtures", help="write test/fixtures/reference (the default)")
    for name, positional in (("logits", ["model_dir"]), ("check-adapter", ["base_dir", "adapter_dir"])):
        p = sub.add_parser(name)
        for arg in positional:
            p.add_argument(arg)
        p.add_argument("out")
        group = p.add_mutually_exclusive_group()
        group.add_argument("--prompts", help="JSON list of token id lists, e.g. '[[1,2,3],[4]]'")
        group.add_argument("--prompts-file", help="file holding such a JSON list")
    args = parser.parse_args()
    if args.mode in (None, "fixtures"):
        generate_fixtures()
    elif args.mode == "logits":
        mode_logits(args)
    else:
        mode_check_adapter(args)


if __name__ == "__main__":
    main()
