"""Which save a proxy request plays, and which upstream model answers it.

Every OpenAI-compatible front end lets the player type (or pick from `GET /v1/models`) a
model name, and sends it as the body's `model`; not all of them can add a header, and none
sends an id of the chat. So the save is named in the model, readably:

    axiom/u/<universe>/<upstream model>      a save per chat, found or made (`chats.py`)
    axiom/s/<name>--<save_id>/<upstream>     one save; <name> is for reading, only the id counts
    axiom/<save_id>/<upstream model>         one save (the older form, still read)
    axiom/u/<universe>, axiom/s/<...>        the studio's configured narrate model answers

The upstream part may itself hold slashes (`axiom/u/harbour/meta-llama/Llama-3.1-8B`). A
client that can send headers may instead send `X-Axiom-Save: <save_id>` with any `model`,
which is then the upstream model as it is; when both name a save they must agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.text import slugify

PREFIX = "axiom/"
UNIVERSE = "u/"
SAVE = "s/"
ID_MARK = "--"
SAVE_HEADER = "X-Axiom-Save"
READABLE_CHARS = 40  # of a save's name in its model id


class BindingError(ValueError):
    """The request names no save or universe, or two different saves."""


@dataclass(frozen=True)
class Binding:
    save_id: str = ""  # "" with a universe: the chat's own save, found or made
    upstream_model: str = ""  # "" : the studio's configured model for narration
    universe_slug: str = ""


def universe_model_name(universe_slug: str, upstream_model: str = "") -> str:
    """Return the model name under which each chat of a universe gets a save of its own."""
    return f"{PREFIX}{UNIVERSE}{universe_slug}" + (f"/{upstream_model}" if upstream_model else "")


def model_name(save_id: str, upstream_model: str = "", *, name: str = "") -> str:
    """Return the model name that binds a request to `save_id` (readable with the save's `name`)."""
    readable = slugify(name)[:READABLE_CHARS].strip("-")
    head = f"{PREFIX}{SAVE}{readable}{ID_MARK}{save_id}" if readable else f"{PREFIX}{save_id}"
    return f"{head}/{upstream_model}" if upstream_model else head


def _save_id(model: str, part: str, *, readable: bool) -> str:
    """Return the save id of a model name's save part (`<name>--<id>` when `readable`, else `<id>`)."""
    save_id = part.rpartition(ID_MARK)[2] if readable else part
    save_id = save_id.strip()
    if not save_id or not re.fullmatch(r"[\w-]+", save_id):
        raise BindingError(
            f"The model name {model!r} names no save: use {PREFIX}{SAVE}<name>{ID_MARK}<save_id>/<model> "
            f"or {PREFIX}{UNIVERSE}<universe>/<model> (GET /v1/models lists them)."
        )
    return save_id


def binding_for(*, model, header: str | None) -> Binding:
    """Return the save (or universe) and upstream model a request asks for; raise BindingError if it names neither."""
    model = model if isinstance(model, str) else ""
    header = (header or "").strip()
    if model.startswith(PREFIX):
        rest = model[len(PREFIX) :]
        if rest.startswith(UNIVERSE):
            slug, _, upstream = rest[len(UNIVERSE) :].partition("/")
            if not slug.strip():
                raise BindingError(
                    f"The model name {model!r} names no universe: use {PREFIX}{UNIVERSE}<universe>/<model>."
                )
            if header:
                return Binding(save_id=header, upstream_model=upstream.strip())
            return Binding(universe_slug=slug.strip(), upstream_model=upstream.strip())
        readable = rest.startswith(SAVE)
        part, _, upstream = (rest[len(SAVE) :] if readable else rest).partition("/")
        save_id = _save_id(model, part, readable=readable)
        if header and header != save_id:
            raise BindingError(
                f"The model name names save {save_id!r} but the {SAVE_HEADER} header names {header!r}: send one."
            )
        return Binding(save_id=save_id, upstream_model=upstream.strip())
    if header:
        return Binding(save_id=header, upstream_model=model.strip())
    raise BindingError(
        f"No save named: set the model to {PREFIX}{UNIVERSE}<universe>/<model> (a save per chat) or "
        f"{PREFIX}{SAVE}<name>{ID_MARK}<save_id>/<model> (or send the {SAVE_HEADER} header). "
        "GET /v1/models lists what this key may play."
    )
