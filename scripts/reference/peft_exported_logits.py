"""Loads each adapter the engine exported (test/fixtures/exported-adapters/<model>/adapter, written by
scripts/write-exported-adapters.ts) with PEFT's PeftModel.from_pretrained onto the reference base
model, and writes the PeftModel's float32 logits for the reference prompts to
test/fixtures/exported-adapters/<model>/logits.json (same layout as the reference logits.json
prompts). Run with the reference venv (see README.md in this folder)."""
import json
import os

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REFERENCE = os.path.join(ROOT, "test", "fixtures", "reference")
EXPORTED = os.path.join(ROOT, "test", "fixtures", "exported-adapters")

torch.set_num_threads(1)
prompts = json.load(open(os.path.join(REFERENCE, "logits.json")))["models"]
for name in sorted(os.listdir(EXPORTED)):
    adapter = os.path.join(EXPORTED, name, "adapter")
    if not os.path.isdir(adapter):
        continue
    base = AutoModelForCausalLM.from_pretrained(
        os.path.join(REFERENCE, name), torch_dtype=torch.float32, attn_implementation="eager"
    )
    model = PeftModel.from_pretrained(base, adapter)
    model.eval()
    out = []
    with torch.no_grad():
        for prompt in prompts[name]["prompts"]:
            logits = model(input_ids=torch.tensor([prompt["ids"]])).logits[0]
            out.append({"name": prompt["name"], "ids": prompt["ids"],
                        "logits": [[float(f"{v:.9g}") for v in row] for row in logits.tolist()]})
    import peft, transformers
    with open(os.path.join(EXPORTED, name, "logits.json"), "w") as handle:
        json.dump({"format": "policyloop exported-adapter logits v1", "base": name, "adapter": "adapter",
                   "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                                 "peft": peft.__version__},
                   "prompts": out}, handle)
    print("wrote", os.path.join(EXPORTED, name, "logits.json"))
