"""What a proxy request may spend: the operator's limits, checked before anything is written or sent.

A front end picks the model and the sampling fields, but the upstream account is the
operator's. So, before the save is synced or anything relayed:

- **the model** must be one the operator allows: `AXIOM_PROXY_MODELS` (a comma list, or `*` for
  any); the studio's own narrate model always is (`axiom/u/<universe>` without a model asks
  for it). Anything else is refused, 400 `model_not_allowed` (`param: model`);
- **`max_tokens`** (or `max_completion_tokens`) may not pass `AXIOM_PROXY_MAX_TOKENS`, by default
  the narrator's own cap (`AXIOM_LLM_MAX_TOKENS_NARRATE`, else `AXIOM_LLM_MAX_TOKENS`); a request
  that names neither is sent with the cap, so no answer runs unbounded;
- **`n`** (answers per request, SillyTavern's multiple swipes) may not pass `AXIOM_PROXY_MAX_N` (1);
  over a cap: 400 `over_limit` naming the field;
- **the spend guards**: the save's hourly one and the key's user's daily one
  (`TrackedLLM.preflight`: `AXIOM_LLM_CALLS_PER_USER_DAY` / `_TOKENS_PER_USER_DAY`), answered 429
  `spend_limit` with `Retry-After` by the view; the refusal is logged as an LLM call (refused).
"""

from __future__ import annotations

from django.conf import settings

ANY = "*"


class OverLimit(ValueError):
    """A request the operator's limits refuse (`code`, `param`: the field)."""

    def __init__(self, message: str, *, code: str, param: str):
        super().__init__(message)
        self.code = code
        self.param = param


def narrate_max_tokens() -> int:
    """The narrator's own cap on an answer: the proxy's default cap."""
    options = getattr(settings, "AXIOM_LLM_OPERATION_OPTIONS", {}).get("narrate", {})
    return options.get("max_tokens") or settings.AXIOM_LLM_MAX_TOKENS


def limits_apply(body: dict, *, upstream_model: str, narrate_model: str) -> dict:
    """Return the body as it may be relayed (`max_tokens` filled in when absent); raise OverLimit."""
    allowed = set(settings.AXIOM_PROXY_MODELS)
    if ANY not in allowed and upstream_model not in allowed | {narrate_model}:
        names = ", ".join(sorted(allowed | {narrate_model})) or "(none)"
        raise OverLimit(
            f"The model {upstream_model!r} is not one this studio lets the proxy use ({names}); "
            "ask its operator (AXIOM_PROXY_MODELS).",
            code="model_not_allowed",
            param="model",
        )
    cap = settings.AXIOM_PROXY_MAX_TOKENS or narrate_max_tokens()
    for field in ("max_tokens", "max_completion_tokens"):
        if isinstance(body.get(field), int) and body[field] > cap:
            raise OverLimit(
                f"`{field}` is {body[field]}; this studio allows at most {cap} tokens an answer "
                "(AXIOM_PROXY_MAX_TOKENS).",
                code="over_limit",
                param=field,
            )
    n_cap = settings.AXIOM_PROXY_MAX_N
    if isinstance(body.get("n"), int) and body["n"] > n_cap:
        raise OverLimit(
            f"`n` is {body['n']}; this studio allows at most {n_cap} answer(s) a request (AXIOM_PROXY_MAX_N).",
            code="over_limit",
            param="n",
        )
    if body.get("max_tokens") is None and body.get("max_completion_tokens") is None:
        body = {**body, "max_tokens": cap}
    return body
