#!/usr/bin/env python3
"""Reference fixtures of OpenPipe ART's RL loss (`art/loss.py`, openpipe-art 0.5.23), for the local
engine's objective (src/engine/objective.ts).

Run with the venv of requirements-art.txt (see README.md):

  art_loss.py        writes test/fixtures/reference/art-loss.json (seeded, deterministic)

For each case it calls ART's own `loss_fn` on one fixed batch (ragged rows, masked prompt tokens,
positive, negative and zero advantages, a missing old logprob, two sequences packed in one row)
and records, in float32:

- `token_loss`: each token's term of the policy loss (`policy_loss` before `.sum()`, times the mask),
  read as the gradient of ART's `policy_loss_sum` with respect to `weights` (ones): that sum is
  `sum(per_token * weights * mask)`, so the gradient is the per-token term, with no formula of
  ART's repeated here;
- `grad`: the gradient of ART's reduced `policy_loss` (the mean over assistant tokens) with respect
  to the new logprobs;
- `kl_policy_ref` and ART's `loss/importance_ratio_mean`.

Only `art/loss.py` and `art/utils/group_aggregate.py` are loaded, from the installed wheel,
unchanged: `art/__init__.py` imports ART's whole client (openai, litellm, weave, ...) and
`art.dev` its typed dicts (through `art.types`, openai's types); `loss.py` uses `dev` only for the
annotation `dev.TrainConfig`, a TypedDict, so a stub module stands in for it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import platform
import sys
import types
from importlib.metadata import version
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "test" / "fixtures" / "reference" / "art-loss.json"


def load_art_loss():
    """`art.loss` from the installed openpipe-art wheel, without running `art/__init__.py`."""
    spec = importlib.util.find_spec("art")
    if spec is None or spec.submodule_search_locations is None:
        sys.exit("openpipe-art is not installed in this venv (see scripts/reference/README.md)")
    root = Path(list(spec.submodule_search_locations)[0])
    art = types.ModuleType("art")
    art.__path__ = [str(root)]
    sys.modules["art"] = art
    utils = types.ModuleType("art.utils")
    utils.__path__ = [str(root / "utils")]
    sys.modules["art.utils"] = utils
    dev = types.ModuleType("art.dev")
    dev.TrainConfig = dict  # only an annotation in loss.py
    sys.modules["art.dev"] = dev
    art.utils = utils
    art.dev = dev
    loss_spec = importlib.util.spec_from_file_location("art.loss", root / "loss.py")
    module = importlib.util.module_from_spec(loss_spec)
    sys.modules["art.loss"] = module
    loss_spec.loader.exec_module(module)
    return module, root


# One batch, already aligned (what `LossInputs.align_inputs` yields: position t holds token t+1's
# values). Rows: (length, prompt tokens, [(group id, advantage, tokens)]). Tokens past a row's
# length are padding (mask 0). Group ids start at 1: ART's sequence mean groups by
# `group_ids * assistant_mask`, so group 0 would share its mean with the masked tokens.
ROWS = [
    (9, 2, [(1, 1.3, 7)]),
    (6, 1, [(2, -0.8, 5)]),
    (5, 2, [(3, 0.0, 3)]),
    (9, 1, [(4, -2.1, 3), (5, 0.6, 4)]),  # two sequences packed in one row, a masked token between
    (4, 1, [(6, 0.45, 3)]),
]
WIDTH = 10


def batch(seed: int = 36):
    generator = torch.Generator().manual_seed(seed)
    rows = len(ROWS)
    mask = torch.zeros(rows, WIDTH, dtype=torch.bool)
    advantages = torch.zeros(rows, WIDTH)
    group_ids = torch.zeros(rows, WIDTH, dtype=torch.long)
    for row, (length, prompt, segments) in enumerate(ROWS):
        position = prompt
        for index, (group, advantage, count) in enumerate(segments):
            if index > 0:
                position += 1  # a context token between packed sequences
            for _ in range(count):
                mask[row, position] = True
                advantages[row, position] = advantage
                group_ids[row, position] = group
                position += 1
        assert position <= length <= WIDTH, (row, position, length)
    new = -(torch.rand(rows, WIDTH, generator=generator) * 2.9 + 0.05)
    # Old logprobs near the new ones, a few far (ratios beyond every clip range) and one missing.
    noise = torch.randn(rows, WIDTH, generator=generator) * 0.25
    noise[0, 3] = 1.6
    noise[1, 2] = -1.9
    noise[3, 7] = 2.4
    noise[4, 2] = -0.9
    old = new + noise
    old[0, 5] = float("nan")
    reference = new + torch.randn(rows, WIDTH, generator=generator) * 0.4
    # The sampler's logprobs when the old ones are precalculated by the trainer (truncated IS).
    original = new + torch.randn(rows, WIDTH, generator=generator) * 0.35
    original[0, 4] = new[0, 4] - 1.5
    original[3, 6] = float("nan")
    return mask, advantages, group_ids, new, old, reference, original


# name, the engine's experimental_config, ART's config (default: the same), ref, precalculate
CASES: list[tuple[str, dict, dict | None, bool, bool]] = [
    ("cispo defaults", {}, None, False, False),
    ("ppo: true", {"ppo": True}, None, False, False),
    ("loss_fn ppo", {"loss_fn": "ppo"}, {"ppo": True}, False, False),
    ("cispo epsilon/epsilon_high", {"epsilon": 0.3, "epsilon_high": 0.5}, None, False, False),
    ("ppo epsilon/epsilon_high", {"ppo": True, "epsilon": 0.1, "epsilon_high": 0.3}, None, False, False),
    ("cispo sequence (GSPO)", {"importance_sampling_level": "sequence", "epsilon": 0.2, "epsilon_high": 0.3}, None, False, False),
    ("ppo sequence (GSPO)", {"ppo": True, "importance_sampling_level": "sequence"}, None, False, False),
    ("cispo average", {"importance_sampling_level": "average", "epsilon": 0.2, "epsilon_high": 0.3}, None, False, False),
    ("ppo average", {"ppo": True, "importance_sampling_level": "average"}, None, False, False),
    ("cispo geometric_average", {"importance_sampling_level": "geometric_average", "epsilon": 0.2, "epsilon_high": 0.3}, None, False, False),
    ("ppo geometric_average", {"ppo": True, "importance_sampling_level": "geometric_average"}, None, False, False),
    ("cispo max_negative_advantage_importance_sampling_weight", {"max_negative_advantage_importance_sampling_weight": 1.5}, None, False, False),
    ("ppo max_negative_advantage_importance_sampling_weight", {"ppo": True, "epsilon": 0.5, "max_negative_advantage_importance_sampling_weight": 1.2}, None, False, False),
    ("cispo mask_prob_ratio", {"mask_prob_ratio": True, "epsilon": 0.2, "epsilon_high": 0.3}, None, False, False),
    ("ppo mask_prob_ratio", {"ppo": True, "mask_prob_ratio": True}, None, False, False),
    ("cispo kimi_k2_tau", {"kimi_k2_tau": 0.5}, None, False, False),
    ("ppo kimi_k2_tau", {"ppo": True, "kimi_k2_tau": 0.3}, None, False, False),
    ("cispo kl_penalty_coef (current_learner)", {"kl_penalty_coef": 0.2}, None, True, False),
    ("ppo kl_penalty_coef (current_learner)", {"ppo": True, "kl_penalty_coef": 0.5}, None, True, False),
    ("cispo kl_penalty_coef (sample)", {"kl_penalty_coef": 0.2, "kl_penalty_source": "sample"}, None, True, False),
    ("ppo kl_penalty_coef (sample)", {"ppo": True, "kl_penalty_coef": 0.5, "kl_penalty_source": "sample"}, None, True, False),
    ("cispo truncated_importance_sampling", {"truncated_importance_sampling": 1.2}, None, False, True),
    ("ppo truncated_importance_sampling", {"ppo": True, "truncated_importance_sampling": 1.5}, None, False, True),
    ("cispo precalculate_logprobs", {"precalculate_logprobs": True}, None, False, True),
    (
        "ppo sequence + cap + mask + tau + kl (sample)",
        {
            "ppo": True,
            "importance_sampling_level": "sequence",
            "epsilon": 0.3,
            "max_negative_advantage_importance_sampling_weight": 1.25,
            "mask_prob_ratio": True,
            "kimi_k2_tau": 0.2,
            "kl_penalty_coef": 0.3,
            "kl_penalty_source": "sample",
        },
        None,
        True,
        False,
    ),
    (
        "cispo geometric_average + kl + truncated IS",
        {
            "importance_sampling_level": "geometric_average",
            "kl_penalty_coef": 0.1,
            "truncated_importance_sampling": 1.1,
        },
        None,
        True,
        True,
    ),
]


def to_list(tensor: torch.Tensor) -> list:
    return [[None if math.isnan(v) else float(v) for v in row] for row in tensor.tolist()]


def run_case(loss_module, config, art_config, with_reference, precalculate, tensors):
    mask, advantages, group_ids, new_values, old, reference, original = tensors
    new = new_values.clone().requires_grad_(True)
    weights = torch.ones_like(advantages).requires_grad_(True)
    inputs = loss_module.AlignedLossInputs(
        assistant_mask=mask,
        # ART's trainer precalculates: the old logprobs are the current policy's, the sampler's
        # become the original ones (art/unsloth/train.py, precalculate_logprobs).
        old_logprobs=new_values.clone() if precalculate else old.clone(),
        advantages=advantages.clone(),
        weights=weights,
        group_ids=group_ids,
        original_logprobs=original.clone() if precalculate else None,
    )
    loss = loss_module.loss_fn(
        inputs,
        new,
        reference.clone() if with_reference else None,
        None,
        art_config,
        reduction="mean",
    )
    (grad,) = torch.autograd.grad(loss.policy_loss, [new], retain_graph=True)
    (token_loss,) = torch.autograd.grad(loss.policy_loss_sum, [weights])
    # The per-token terms are the loss: their sum over the assistant tokens, over their count.
    check = (token_loss * mask).sum() / mask.sum()
    assert torch.allclose(check, loss.policy_loss, rtol=1e-5, atol=1e-7), (check, loss.policy_loss)
    diagnostics = loss.offpolicy_diagnostics
    ratio_mean = float(diagnostics.ratio_sum / diagnostics.token_count.clamp_min(1.0))
    return {
        "token_loss": to_list(token_loss * mask),
        "grad": to_list(grad),
        "policy_loss": float(loss.policy_loss.detach()),
        "kl_policy_ref": None if loss.kl_policy_ref is None else float(loss.kl_policy_ref.detach()),
        "importance_ratio_mean": ratio_mean,
    }


def main() -> None:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    loss_module, root = load_art_loss()
    tensors = batch()
    mask, advantages, group_ids, new, old, reference, original = tensors
    cases = []
    for name, config, art_config, with_reference, precalculate in CASES:
        result = run_case(loss_module, config, art_config or config, with_reference, precalculate, tensors)
        cases.append(
            {
                "name": name,
                "config": config,
                "art_config": art_config or config,
                "reference": with_reference,
                "precalculated": precalculate,
                **result,
            }
        )
        print(f"{name}: policy_loss {result['policy_loss']:.6g}")
    fixture = {
        "format": "policyloop ART loss reference v1",
        "generator": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "openpipe-art": version("openpipe-art"),
            "loss_module": str((root / "loss.py").relative_to(root.parent)),
        },
        "layout": (
            "Every tensor is [row][position], float32, already aligned as ART's AlignedLossInputs "
            "(position t holds the values of token t+1); null is NaN. sequence_ids: the engine's "
            "sequence of each assistant token (ART's group id), -1 elsewhere. old_logprobs are the "
            "sampler's; in cases with precalculated true ART got old = new_logprobs and original = "
            "original_logprobs. token_loss: ART's per-token policy loss times the mask; grad: "
            "d policy_loss (mean over assistant tokens) / d new_logprobs."
        ),
        "inputs": {
            "assistant_mask": [[int(v) for v in row] for row in mask.int().tolist()],
            "advantages": to_list(advantages),
            "sequence_ids": [
                [int(g) if m else -1 for g, m in zip(grow, mrow)]
                for grow, mrow in zip(group_ids.tolist(), mask.tolist())
            ],
            "new_logprobs": to_list(new),
            "old_logprobs": to_list(old),
            "ref_logprobs": to_list(reference),
            "original_logprobs": to_list(original),
        },
        "cases": cases,
    }
    OUT.write_text(json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
