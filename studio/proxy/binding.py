"""Which save a proxy request plays, and which upstream model answers it.

Every OpenAI-compatible front end lets the player type a model name, and sends it as the
body's `model`; not all of them can add a header. So the save is named in the model:

    axiom/<save_id>/<upstream model>     e.g. axiom/3f9c2a1b7d4e8f60/qwen2.5-coder-1.5b
    axiom/<save_id>                      the studio's configured narrate model answers

The upstream part may itself hold slashes (`axiom/<id>/meta-llama/Llama-3.1-8B`). A client
that can send headers may instead send `X-Axiom-Save: <save_id>` with any `model`, which is
then the upstream model as it is; when both name a save they must agree.
"""
from __future__ import annotations

from dataclasses import dataclass

PREFIX = "axiom/"
SAVE_HEADER = "X-Axiom-Save"


class BindingError(ValueError):
    """The request names no save, or two different ones."""


@dataclass(frozen=True)
class Binding:
    save_id: str
    upstream_model: str  # "" : the studio's configured model for narration


def model_name(save_id: str, upstream_model: str = "") -> str:
    """Return the model name that binds a request to `save_id` (and picks `upstream_model`)."""
    return f"{PREFIX}{save_id}/{upstream_model}" if upstream_model else f"{PREFIX}{save_id}"


def binding_for(*, model, header: str | None) -> Binding:
    """Return the save and upstream model a request asks for; raise BindingError if it names no save."""
    model = model if isinstance(model, str) else ""
    header = (header or "").strip()
    if model.startswith(PREFIX):
        save_id, _, upstream = model[len(PREFIX):].partition("/")
        save_id = save_id.strip()
        if not save_id:
            raise BindingError(f"The model name {model!r} names no save: use {PREFIX}<save_id>/<upstream model>.")
        if header and header != save_id:
            raise BindingError(
                f"The model name names save {save_id!r} but the {SAVE_HEADER} header names {header!r}: send one."
            )
        return Binding(save_id=save_id, upstream_model=upstream.strip())
    if header:
        return Binding(save_id=header, upstream_model=model.strip())
    raise BindingError(
        f"No save named: set the model to {PREFIX}<save_id>/<upstream model> (or send the {SAVE_HEADER} header). "
        "GET /v1/models lists the saves this key may play."
    )
