"""Schemathesis hooks of the contract test (test/server/contract.test.ts), loaded with
SCHEMATHESIS_HOOKS=policyloop_contract_hooks.

They stand in for what a schema cannot say, and nothing else:

- State a client holds: each write gets an `Idempotency-Key` of its own (a generated key is often
  the same on two different requests, which the service rightly answers 422
  `idempotency_key_reused`; that rule has its own tests). Only keys the document accepts are
  replaced, so invalid ones still go out invalid.
- Cost: a chat completion asks for at most 4 choices of at most 16 tokens (a valid request may ask
  for 128 choices of 4,096 tokens of the largest built-in model, which takes minutes on a CPU; the
  sampling limits have their own tests). Only valid values above those caps are lowered.
- Rules no schema can state, dropped as failures by their exact answer (each drop is printed):
  - a positive request answered 422 because its `after` cursor names no item (ids the generator
    cannot know), or because its prompt is longer than the model context in tokens;
  - a checkpoint list that still answers after `DELETE .../checkpoints`: that operation deletes
    steps, not the list (the published contract's design).
"""

import json
import re
import sys
from itertools import count

import schemathesis

KEY = re.compile(r"^[\x20-\x7e]{1,255}$")
_keys = count(1)
dropped: dict[str, int] = {}


def _lower(body: dict, name: str, cap: int, maximum: int) -> None:
    """Lowers a valid value (cap < value <= the schema's maximum) to `cap`; leaves invalid ones as they are."""
    value = body.get(name)
    if isinstance(value, int) and not isinstance(value, bool) and cap < value <= maximum:
        body[name] = cap


@schemathesis.hook
def map_case(context, case):
    headers = case.headers
    if headers is not None:
        for name in list(headers.keys()):
            if name.lower() == "idempotency-key" and isinstance(headers[name], str) and KEY.match(headers[name]):
                headers[name] = f"contract-{next(_keys)}"
    if case.path.startswith("/v1/chat/completions") and isinstance(case.body, dict):
        _lower(case.body, "n", 4, 128)
        for name in ("max_tokens", "max_completion_tokens"):
            _lower(case.body, name, 16, 2**53 - 1)
        if "max_tokens" not in case.body and "max_completion_tokens" not in case.body:
            case.body["max_tokens"] = 16
    return case


def _details(response):
    try:
        detail = json.loads(response.content).get("detail")
    except (ValueError, AttributeError):
        return None
    return detail if isinstance(detail, list) else None


def _stateful_422(response) -> str | None:
    details = _details(response)
    if response.status_code != 422 or not details:
        return None
    kinds = set()
    for item in details:
        loc, msg = item.get("loc"), str(item.get("msg", ""))
        if loc == ["query", "after"] and msg.startswith("No "):
            kinds.add("unknown `after` cursor")
        elif loc == ["body", "messages"] and re.match(r"^The prompt is \d+ tokens long", msg):
            kinds.add("prompt longer than the model context")
        else:
            return None
    return ", ".join(sorted(kinds))


@schemathesis.hook
def filter_failure(context, failure, case, response):
    reason = None
    if failure.code == "ST202":
        reason = _stateful_422(response)
    elif failure.code == "ST301" and re.search(r"DELETE /v1/preview/models/[^/]+/checkpoints$", getattr(failure, "free", "")):
        reason = "checkpoint list read after DELETE .../checkpoints"
    if reason is None:
        return True
    dropped[reason] = dropped.get(reason, 0) + 1
    print(f"policyloop contract hooks: dropped {failure.code} ({reason}) for {case.method} {case.path}", file=sys.stderr)
    return False
