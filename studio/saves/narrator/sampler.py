"""The narrator's sampler settings: the save's overrides over the universe's over the environment's.

Five settings, each resolved on its own, first set wins:

1. the save's `PlaySettings` (the Console's "Play settings" form, the API);
2. the universe's meta key `sampler_<name>` (`SAMPLER_META_KEYS`, e.g. `sampler_temperature`);
3. the environment: `AXIOM_LLM_<NAME>_NARRATE` (and `AXIOM_LLM_MAX_TOKENS` for max tokens);
4. none: the field is not sent and the model server's default applies.

A universe meta value that is not a number in range is ignored (and `resolve_sampler` says so
in `problems`, shown on the Console), never sent. `SamplerSettings.request_options()` is what
the LLM client takes (`max_tokens` and `sampling`, see `OpenAICompatibleBackend.stream`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from studio import limits

FIELDS = ("temperature", "top_p", "max_tokens", "frequency_penalty", "repeat_penalty")
LABELS = {
    "temperature": "Temperature",
    "top_p": "Top-p",
    "max_tokens": "Max tokens",
    "frequency_penalty": "Frequency penalty",
    "repeat_penalty": "Repetition penalty",
}
# (lowest, highest) accepted; max tokens is an integer. Declared once, in studio/limits.py.
RANGES = {name: (limits.SAMPLER[name].low, limits.SAMPLER[name].high) for name in FIELDS}
HELP = {
    "temperature": "Randomness of the narration: 0 always picks the likeliest word, 0.7-1.0 is usual for stories.",
    "top_p": "Nucleus sampling: only the likeliest words whose probabilities add up to this are considered (1 = all).",
    "max_tokens": "The longest narration the model may write, in tokens; a longer one is cut (and says so).",
    "frequency_penalty": "OpenAI-style: above 0 makes words already used less likely (-2 to 2).",
    "repeat_penalty": "llama.cpp-style repetition penalty: above 1 discourages repeating text (1 = off).",
}
SAMPLER_META_KEYS = {f"sampler_{name}": HELP[name] for name in FIELDS}
SOURCES = ("save", "universe", "environment", "server default")


class InvalidSampler(ValueError):
    """A sampler value out of range or not a number (the message names the setting)."""


def parse_value(name: str, value) -> float | int | None:
    """Return `value` as the setting's type if it is in range; None for empty; raise InvalidSampler."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    low, high = RANGES[name]
    try:
        number = int(str(value).strip()) if name == "max_tokens" else float(str(value).strip())
    except ValueError:
        raise InvalidSampler(
            f"{LABELS[name]}: “{value}” is not a {'whole ' if name == 'max_tokens' else ''}number."
        ) from None
    if number != number or not low <= number <= high:  # NaN, or out of range
        raise InvalidSampler(f"{LABELS[name]}: {value} is out of range ({low} to {high}).")
    return number


@dataclass(frozen=True)
class SamplerSettings:
    """The resolved settings (None: not sent) and where each came from."""

    values: dict
    sources: dict
    problems: tuple[str, ...] = field(default=())

    def request_options(self) -> dict:
        """Return the keyword arguments for the LLM client's `chat` / `stream`."""
        sampling = {k: v for k, v in self.values.items() if k != "max_tokens" and v is not None}
        options: dict = {"sampling": sampling}
        if self.values.get("max_tokens"):
            options["max_tokens"] = int(self.values["max_tokens"])
        return options

    def as_record(self) -> dict:
        """Return what a snapshot keeps: each setting's value and source."""
        return {name: {"value": self.values.get(name), "source": self.sources.get(name)} for name in FIELDS}

    def rows(self) -> list[dict]:
        return [
            {
                "name": name,
                "label": LABELS[name],
                "value": self.values.get(name),
                "source": self.sources.get(name),
                "help": HELP[name],
            }
            for name in FIELDS
        ]


def environment_defaults() -> dict:
    """Return the narrator's settings from the environment (None where unset)."""
    configured = (getattr(settings, "AXIOM_LLM_OPERATION_OPTIONS", None) or {}).get("narrate") or {}
    values = {name: configured.get(name) for name in FIELDS}
    if not values.get("max_tokens"):
        values["max_tokens"] = getattr(settings, "AXIOM_LLM_MAX_TOKENS", None) or None
    return values


def resolve_sampler(*, game_save, meta: dict | None = None) -> SamplerSettings:
    """Return the sampler settings a narration of `game_save` uses (see the module)."""
    from studio.saves.narrator.authors_note import play_settings_of
    from studio.saves.narrator.prompt import narrator_meta

    meta = narrator_meta(game_save) if meta is None else meta
    own = play_settings_of(game_save)
    env = environment_defaults()
    values, sources, problems = {}, {}, []
    for name in FIELDS:
        value, source = None, "server default"
        saved = getattr(own, name, None) if own is not None else None
        if saved is not None:
            value, source = saved, "save"
        else:
            raw = meta.get(f"sampler_{name}", "")
            try:
                parsed = parse_value(name, raw)
            except InvalidSampler as exc:
                problems.append(f"Universe meta sampler_{name} ignored: {exc}")
                parsed = None
            if parsed is not None:
                value, source = parsed, "universe"
            elif env.get(name) is not None:
                value, source = env[name], "environment"
        values[name], sources[name] = value, source
    return SamplerSettings(values=values, sources=sources, problems=tuple(problems))
