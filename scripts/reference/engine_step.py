#!/usr/bin/env python3
"""torch + transformers + PEFT's time for the local engine's LoRA RL step and batched sampling.

The other side of `bench/engine-vs-torch.ts` (issue 37: the engine within 1.5x of this). It builds
a random-initialised, seeded float32 model of the SmolLM2-135M shape (LlamaConfig: 30 layers,
width 576, 9 / 3 heads of 64, MLP 1536, vocabulary 49,152, tied, rope theta 100,000) or, with
`--shape qwen3-0.6b`, of the Qwen3-0.6B shape (28 layers, width 1024, 16 / 8 heads of 128, MLP
3072, vocabulary 151,936, tied), wraps it in a PEFT LoRA adapter (rank 8, alpha 16, dropout 0, on
q, k, v, o, gate, up and down) and times, on the CPU with `torch.set_num_threads(--threads)`:

- `train`: one RL step on `--batch` sequences of `--prompt` prompt tokens and `--new` learned
  tokens (in micro-batches of `--micro-batch` rows with the gradient accumulated, when given):
  forward (logits only where a learned token is predicted, `logits_to_keep`), the learned
  tokens' logprobs, a policy-gradient loss (-(advantage x logprob), mean over the learned tokens),
  backward, gradient clipping to norm 1 and an AdamW step (the engine's defaults: lr 5e-3, betas
  0.9 / 0.99, eps 1e-8, weight decay 0.01);
- `sample`: `generate` on `--batch` prompts of `--prompt` tokens, `--new` new tokens each (KV
  cache, do_sample, temperature 1, no top-k / top-p, no early stop: min_new_tokens =
  max_new_tokens), through the adapter as the engine samples a trained policy.

Tokens/s count every token of the step (`batch x (prompt + new)`) for training and the new tokens
for sampling, as the engine's side does. Output: JSON lines on stdout.

  engine_step.py [--shape smollm2-135m|qwen3-0.6b] [--threads N] [--repeats 3] [--warmup 1] [--what train,sample]
  engine_step.py --serve ...   # prints {"event": "ready"}, then runs one `train` or `sample` per stdin line

`--serve` is how the bench interleaves rounds with the engine's (the model is built once).
No model is downloaded: nothing here reads the Hub.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import warnings
import resource
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random weights from a config; never ask the Hub

import torch

# transformers 5.24 warns on every PEFT forward that `is_gradient_checkpointing` is deprecated.
warnings.filterwarnings("ignore", category=FutureWarning)

SHAPES = {
    "smollm2-135m": dict(
        arch="llama",
        num_hidden_layers=30,
        hidden_size=576,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        intermediate_size=1536,
        vocab_size=49152,
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
    ),
    "qwen3-0.6b": dict(
        arch="qwen3",
        num_hidden_layers=28,
        hidden_size=1024,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=3072,
        vocab_size=151936,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
    ),
}
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def emit(record: dict) -> None:
    # Strict JSON for the bench's JSON.parse: a non-finite number (a NaN gradient norm) becomes null.
    clean = {key: (None if isinstance(value, float) and not math.isfinite(value) else value) for key, value in record.items()}
    print(json.dumps(clean, allow_nan=False), flush=True)


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


def build(shape_name: str, seed: int, layers: int | None):
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    shape = dict(SHAPES[shape_name])
    arch = shape.pop("arch")
    theta = shape.pop("rope_theta")
    if layers is not None:
        shape["num_hidden_layers"] = layers
    config_class, model_class = (LlamaConfig, LlamaForCausalLM) if arch == "llama" else (Qwen3Config, Qwen3ForCausalLM)
    config = config_class(
        **shape,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        rope_parameters=dict(rope_type="default", rope_theta=theta),
        bos_token_id=1,
        eos_token_id=2,
        # No padding token: its embedding row would be zero, and a row that starts with that token
        # (the batch's token ids include 0) keeps a zero hidden state whose RMSNorm backward
        # multiplies the gradient by 1/sqrt(eps) in every norm: NaN gradients by layer 30.
        pad_token_id=None,
    )
    torch.manual_seed(seed)
    base = model_class(config).float()
    assert base.lm_head.weight.data_ptr() == base.model.embed_tokens.weight.data_ptr(), "embeddings not tied"
    lora = LoraConfig(
        r=8, lora_alpha=16, target_modules=LORA_TARGETS, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM"
    )
    model = get_peft_model(base, lora)
    # get_peft_model adds the LoRA matrices to `base` in place: count the base model's own parameters.
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    parameters = sum(p.numel() for p in model.parameters()) - trainable
    return model, config, parameters, trainable


def token_ids(rows: int, length: int, vocab: int) -> torch.Tensor:
    # The same ids as the engine's side: row r, position i -> (r * 131 + i * 7919) % vocab.
    rows_index = torch.arange(rows, dtype=torch.long).unsqueeze(1)
    positions = torch.arange(length, dtype=torch.long).unsqueeze(0)
    return (rows_index * 131 + positions * 7919) % vocab


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        started = time.perf_counter()
        self.model, self.config, self.parameters, self.trainable = build(args.shape, args.seed, args.layers)
        self.build_seconds = time.perf_counter() - started
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=5e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)
        length = args.prompt + args.new
        self.train_ids = token_ids(args.train_batch, length, self.config.vocab_size)
        # Advantages +1 / -1 by row, as the engine's side.
        self.advantages = torch.tensor([1.0 if row % 2 == 0 else -1.0 for row in range(args.train_batch)])
        self.prompts = token_ids(args.batch, args.prompt, self.config.vocab_size)
        self.generator_seed = args.seed

    def train(self) -> dict:
        args = self.args
        self.model.train()
        started = time.perf_counter()
        self.optimizer.zero_grad(set_to_none=True)
        learned = args.train_batch * args.new
        total = 0.0
        # Micro-batches of rows accumulate the gradient of the same mean (bounds the activations).
        for start in range(0, args.train_batch, args.micro_batch):
            ids = self.train_ids[start : start + args.micro_batch]
            # Logits only where a learned token is predicted: positions prompt-1 .. prompt+new-2.
            output = self.model(input_ids=ids, logits_to_keep=args.new + 1)
            assert output.logits.shape[1] == args.new + 1, f"logits_to_keep ignored: {tuple(output.logits.shape)}"
            logits = output.logits[:, :-1, :]
            targets = ids[:, args.prompt :]
            logprobs = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            advantages = self.advantages[start : start + args.micro_batch].unsqueeze(1)
            loss = -(advantages * logprobs).sum() / learned
            loss.backward()
            total += float(loss.detach())
            del output, logits, logprobs, loss
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.optimizer.step()
        seconds = time.perf_counter() - started
        tokens = args.train_batch * (args.prompt + args.new)
        return dict(
            what="train",
            seconds=seconds,
            tokens=tokens,
            learned=args.train_batch * args.new,
            tokens_per_second=tokens / seconds,
            loss=total,
            grad_norm=float(grad_norm),
            peak_rss_mb=peak_rss_mb(),
        )

    def sample(self) -> dict:
        args = self.args
        self.model.eval()
        self.generator_seed += 1
        torch.manual_seed(self.generator_seed)
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=self.prompts,
                attention_mask=torch.ones_like(self.prompts),
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=args.new,
                min_new_tokens=args.new,
                use_cache=True,
                pad_token_id=0,
            )
        seconds = time.perf_counter() - started
        new_tokens = (output.shape[1] - args.prompt) * output.shape[0]
        assert output.shape == (args.batch, args.prompt + args.new), f"generate stopped early: {tuple(output.shape)}"
        return dict(
            what="sample",
            seconds=seconds,
            tokens=new_tokens,
            tokens_per_second=new_tokens / seconds,
            peak_rss_mb=peak_rss_mb(),
        )

    def run(self, what: str) -> dict:
        if what == "train":
            return self.train()
        if what == "sample":
            return self.sample()
        raise ValueError(f"expected train or sample, got {what!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--new", type=int, default=64)
    parser.add_argument("--train-batch", type=int, help="rows of the training step; default: --batch")
    parser.add_argument(
        "--micro-batch", type=int, help="rows per forward/backward (gradient accumulation); default: the whole batch"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--what", default="train,sample", help="comma-separated: train, sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, help="the shape with this many layers (quick checks, not figures)")
    parser.add_argument("--serve", action="store_true", help="run one `train` or `sample` per stdin line")
    args = parser.parse_args()

    args.train_batch = args.train_batch or args.batch
    args.micro_batch = args.micro_batch or args.train_batch
    torch.set_num_threads(args.threads)
    bench = Bench(args)
    # A first generate call costs several times a later one (2 layers: 20 s, then 4 s): take it
    # out here, on 2 new tokens, so that a bench without warm-up runs does not count it.
    if args.serve:
        bench.model.eval()
        with torch.inference_mode():
            bench.model.generate(
                input_ids=bench.prompts[:2], attention_mask=torch.ones_like(bench.prompts[:2]), do_sample=True,
                max_new_tokens=2, min_new_tokens=2, pad_token_id=0,
            )
    import peft
    import transformers

    emit(
        dict(
            event="ready",
            shape=args.shape,
            layers=bench.config.num_hidden_layers,
            parameters=bench.parameters,
            lora_parameters=bench.trainable,
            build_seconds=bench.build_seconds,
            threads=torch.get_num_threads(),
            micro_batch=args.micro_batch,
            torch=torch.__version__,
            transformers=transformers.__version__,
            peft=peft.__version__,
            python=platform.python_version(),
            peak_rss_mb=peak_rss_mb(),
        )
    )
    if args.serve:
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            if command:
                emit(bench.run(command))
        return
    for what in [item.strip() for item in args.what.split(",") if item.strip()]:
        for _ in range(args.warmup):
            emit(dict(bench.run(what), warmup=True))
        for repeat in range(args.repeats):
            emit(dict(bench.run(what), repeat=repeat))


if __name__ == "__main__":
    main()
