"""The parameters of a memory search and of the memory context, with the one set of limits.

The JSON API (`/saves/<id>/query`, `/saves/<id>/context`), the search playground and the
Context viewer each build a `SearchParams` or a `ContextParams`; the narrator builds a
`ContextParams` from the player's input. Each validates itself on construction and raises
`InvalidParameters` naming every field that is wrong, which the API answers with its 400
and the pages show beside their fields. The pages' form fields take their bounds from
`LIMITS`, so a browser refuses what the service would.

The limits are the API's documented ones (docs/api.md "Limits"): the pages used to be
narrower (query text 2,000 characters, k up to 50, a token budget of 10-32,000, up to 20
lore entries) and now accept what the API accepts. The Context viewer's "0 lore entries"
is gone with them: `k_lore` is at least 1 everywhere, as the API always had it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TOKEN_BUDGET = 1200
DEFAULT_K_NARRATIVE = 6
DEFAULT_K_LORE = 4
DEFAULT_K = 5


@dataclass(frozen=True)
class Limits:
    """What a search or a context request may ask for (the API's documented limits)."""

    query_text_chars: int = 4000
    k_min: int = 1
    k_max: int = 100
    token_budget_min: int = 1
    token_budget_max: int = 100_000
    focus_terms: int = 50
    focus_term_chars: int = 200
    chunk_type_chars: int = 40


LIMITS = Limits()


class InvalidParameters(ValueError):
    """Parameters out of their limits; `errors` maps each field to what is wrong with it."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{name}: {message}" for name, message in errors.items()))
        self.errors = errors


def _check_int(errors: dict[str, str], name: str, value, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        errors[name] = "Must be an integer."
    elif value < low:
        errors[name] = f"Must be >= {low}."
    elif high is not None and value > high:
        errors[name] = f"Must be <= {high}."


def _check_text(errors: dict[str, str], name: str, value, max_length: int, *, required: bool = False) -> None:
    if not isinstance(value, str):
        errors[name] = "Must be a string."
    elif "\x00" in value:
        errors[name] = "Must not contain NUL characters."
    elif required and not value.strip():
        errors[name] = "Must not be blank."
    elif len(value) > max_length:
        errors[name] = f"At most {max_length} characters."


def _clean_terms(terms) -> tuple[str, ...]:
    if terms is None:
        return ()
    if isinstance(terms, str):
        terms = terms.split(",")
    return tuple(t.strip() for t in terms if isinstance(t, str) and t.strip())


def _check_terms(errors: dict[str, str], terms: tuple[str, ...]) -> None:
    if len(terms) > LIMITS.focus_terms:
        errors["focus_terms"] = f"At most {LIMITS.focus_terms} items."
    elif any(len(t) > LIMITS.focus_term_chars or "\x00" in t for t in terms):
        errors["focus_terms"] = f"Each item at most {LIMITS.focus_term_chars} characters, no NUL."


@dataclass(frozen=True)
class SearchParams:
    """One memory search (`memory_search`): the engine's `VectorMemory.query` parameters."""

    query_text: str
    k: int = DEFAULT_K
    current_turn_id: int | None = None
    max_turn_id: int | None = None
    focus_terms: tuple[str, ...] = field(default=())
    chunk_type: str | None = None
    exclude_chunk_type: str | None = None
    expand_links: bool = False

    def __post_init__(self):
        object.__setattr__(self, "focus_terms", _clean_terms(self.focus_terms))
        object.__setattr__(self, "chunk_type", self.chunk_type or None)
        object.__setattr__(self, "exclude_chunk_type", self.exclude_chunk_type or None)
        errors: dict[str, str] = {}
        _check_text(errors, "query_text", self.query_text, LIMITS.query_text_chars, required=True)
        _check_int(errors, "k", self.k, LIMITS.k_min, LIMITS.k_max)
        for name in ("current_turn_id", "max_turn_id"):
            if getattr(self, name) is not None:
                _check_int(errors, name, getattr(self, name), 0, None)
        _check_terms(errors, self.focus_terms)
        for name in ("chunk_type", "exclude_chunk_type"):
            if getattr(self, name) is not None:
                _check_text(errors, name, getattr(self, name), LIMITS.chunk_type_chars)
        if errors:
            raise InvalidParameters(errors)

    def search_kwargs(self) -> dict:
        """Return the keyword arguments of `memory_search` / `memory_explain_chunk` (not `expand_links`)."""
        return {
            "query_text": self.query_text,
            "k": self.k,
            "current_turn_id": self.current_turn_id,
            "max_turn_id": self.max_turn_id,
            "focus_terms": list(self.focus_terms) or None,
            "chunk_type": self.chunk_type,
            "exclude_chunk_type": self.exclude_chunk_type,
        }


@dataclass(frozen=True)
class ContextParams:
    """One request for the memory context of a save's next turn (`next_turn_context`).

    No focus terms means the narrator's own focus: the player character (see
    `studio.memory.recall.context.next_turn_context`), so the Context viewer and the API show
    what the narrator reads for the same input.
    """

    query_text: str = ""
    focus_terms: tuple[str, ...] = field(default=())
    token_budget: int = DEFAULT_TOKEN_BUDGET
    k_narrative: int = DEFAULT_K_NARRATIVE
    k_lore: int = DEFAULT_K_LORE
    # Point of view (studio.memory.knowledge.pov): None = the characters on scene; () = none.
    pov: tuple[str, ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "focus_terms", _clean_terms(self.focus_terms))
        object.__setattr__(self, "query_text", "" if self.query_text is None else self.query_text)
        errors: dict[str, str] = {}
        if self.pov is not None:
            if isinstance(self.pov, str) or not all(isinstance(p, str) for p in self.pov):
                errors["pov"] = "Must be a list of character names."
            else:
                object.__setattr__(self, "pov", tuple(p.strip() for p in self.pov if p.strip()))
                if len(self.pov) > LIMITS.focus_terms or any(len(p) > LIMITS.focus_term_chars for p in self.pov):
                    errors["pov"] = f"At most {LIMITS.focus_terms} names of {LIMITS.focus_term_chars} characters."
        _check_text(errors, "query_text", self.query_text, LIMITS.query_text_chars)
        _check_terms(errors, self.focus_terms)
        _check_int(errors, "token_budget", self.token_budget, LIMITS.token_budget_min, LIMITS.token_budget_max)
        _check_int(errors, "k_narrative", self.k_narrative, LIMITS.k_min, LIMITS.k_max)
        _check_int(errors, "k_lore", self.k_lore, LIMITS.k_min, LIMITS.k_max)
        if errors:
            raise InvalidParameters(errors)
