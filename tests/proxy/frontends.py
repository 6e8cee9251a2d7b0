"""Request bodies as chat front ends send them to an OpenAI-compatible endpoint.

Built from the front ends' public request code, not recorded from a running copy:

- **SillyTavern**, Chat Completion source "Custom (OpenAI-compatible)": its server
  (`src/endpoints/backends/chat-completions.js`, the CUSTOM branch) posts `messages`, `model`,
  `temperature`, `max_tokens`, `stream`, `presence_penalty`, `frequency_penalty`, `top_p`,
  `top_k`, `stop` (when set), `logit_bias`, plus the "Include Body Parameters" the player
  added, to `<custom URL>/chat/completions` with `Authorization: Bearer <key>` and the
  "Include Headers". Its prompt (PromptManager defaults): the main prompt, character
  description and scenario as system messages, "[Start a new Chat]", example dialogue as
  system messages named `example_user` / `example_assistant`, the character's first message,
  the chat, then the post-history instructions. Continue adds the partial answer and a
  system nudge after it; Impersonate adds a system instruction after the last message.
- **RisuAI**, custom OpenAI-compatible URL (`src/ts/process/request/openAI/requests.ts`):
  `model` (its "request model" field), `messages` (names dropped except `example_*`,
  empty messages dropped, `system` sent as `developer` for models flagged so, an image
  message as content parts with the text last), `max_tokens`, `temperature`, penalties,
  `top_p`, `stream`; `logit_bias` only when set; the full URL `.../v1/chat/completions`.
- **the `openai` Python client**: exactly the keyword arguments given to
  `client.chat.completions.create(...)` (tests/proxy/test_openai_client.py uses the real one).
"""

from __future__ import annotations

ST_MAIN = "Write Mira's next reply in a fictional chat between Mira and Alex. {{axiom_memory}}"
ST_CONTINUE = "[Continue your last message without repeating its original content.]"
ST_IMPERSONATE = (
    "[Write your next reply from the point of view of Alex, using the chat history so far as a guideline for the "
    "writing style of Alex. Don't write as Mira or system. Don't describe actions of Mira.]"
)
GREETING = '*Mira looks up from her ledger.* "Another wet one, Alex. What brings you to the harbour?"'


def sillytavern(
    model: str,
    chat,
    pending: str | None,
    *,
    kind: str = "normal",
    marker: bool = True,
    partial: str = "",
    stream: bool = True,
) -> dict:
    """A SillyTavern Custom (OpenAI-compatible) request: kind is normal, continue or impersonate."""
    messages = [
        {"role": "system", "content": ST_MAIN if marker else ST_MAIN.replace(" {{axiom_memory}}", "")},
        {"role": "system", "content": "Mira is the harbour master's clerk: shrewd, warm, owed money by half the town."},
        {"role": "system", "content": "[Start a new Chat]"},
        {"role": "system", "name": "example_user", "content": "Any work for me today?"},
        {"role": "system", "name": "example_assistant", "content": '"Always, for a price."'},
        {"role": "system", "content": "[Start a new Chat]"},
        {"role": "assistant", "content": GREETING},
    ]
    for player_input, answer in chat:
        messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
    if pending is not None:
        messages.append({"role": "user", "content": pending})
    if kind == "continue":
        messages += [{"role": "assistant", "content": partial}, {"role": "system", "content": ST_CONTINUE}]
    elif kind == "impersonate":
        messages.append({"role": "system", "content": ST_IMPERSONATE})
    else:
        messages.append({"role": "system", "content": "[System note: stay in character; never speak for Alex.]"})
    return {
        "messages": messages,
        "model": model,
        "temperature": 1,
        "max_tokens": 300,
        "stream": stream,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "top_p": 1,
        "top_k": 0,
        "stop": ["\nAlex:"],
        "logit_bias": {},
    }


def risuai(model: str, chat, pending: str, *, image: bool = False, developer: bool = True) -> dict:
    """A RisuAI custom-URL request (not streamed, its default)."""
    system = "developer" if developer else "system"
    messages = [
        {"role": system, "content": "You are Mira, the harbour master's clerk. Reply as Mira only."},
        {"role": system, "content": "[Lorebook] Port Vey: a harbour town of smugglers."},
        {"role": "assistant", "content": GREETING},
    ]
    for player_input, answer in chat:
        messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
    if image:
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}},
                    {"type": "text", "text": pending},
                ],
            }
        )
    else:
        messages.append({"role": "user", "content": pending})
    messages.append({"role": system, "content": "[Global note] Keep replies under 120 words."})
    return {
        "model": model,
        "messages": messages,
        "max_tokens": 500,
        "stream": False,
        "temperature": 0.8,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "top_p": 1,
    }
