"""An agent in another process, as written for OpenAI: the `openai` package reads OPENAI_BASE_URL
and OPENAI_API_KEY from the environment (`context.endpoint.env`), and the agent names a model of
its own. It makes chat completions and Responses calls about the word it is given, plain and
streamed, and prints what it got as one JSON line."""

import json
import os
import sys

from openai import OpenAI

word = sys.argv[1]
client = OpenAI(max_retries=0, timeout=60)

chat = client.chat.completions.create(
    model="gpt-4o", messages=[{"role": "user", "content": f"Say {word}."}], max_tokens=4
)
streamed_chat = client.chat.completions.create(
    model="gpt-4o",
    messages=[{"role": "user", "content": f"Spell {word}."}],
    max_tokens=4,
    stream=True,
)
chunks = sum(1 for _ in streamed_chat)
response = client.responses.create(model="gpt-4o-mini", input=f"Again {word}.", max_output_tokens=4)
events = []
final_status = None
# The stream ends with `response.incomplete` when the model runs out of tokens, as OpenAI's does
# (the SDK's `get_final_response()` wants `response.completed`): read the terminal event itself.
with client.responses.stream(model="gpt-4o-mini", input=f"Once more {word}.", max_output_tokens=4) as stream:
    for event in stream:
        events.append(event.type)
        if event.type in ("response.completed", "response.incomplete"):
            final_status = event.response.status

print(
    json.dumps(
        {
            "word": word,
            "chat": chat.choices[0].finish_reason,
            "chat_chunks": chunks,
            "response": response.status,
            "response_text": response.output_text,
            "stream_first": events[0],
            "stream_last": events[-1],
            "stream_status": final_status,
            "models": [model.id for model in client.models.list().data],
            "wandb_key": os.environ.get("WANDB_API_KEY"),
        }
    )
)
