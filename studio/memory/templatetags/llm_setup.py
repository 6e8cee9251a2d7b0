"""`{% no_model_notice save %}`: say that no LLM is connected and how to connect one.

Shown on a living save's Console, Facts, Beliefs and Mental models pages (and, with
`always=True`, wherever a model is needed whatever the memory mode) while
`AXIOM_LLM_BASE_URL` is empty; renders nothing once a model is configured.
"""

from __future__ import annotations

from django import template
from django.conf import settings

register = template.Library()

NO_LLM_SKIP = "no LLM configured"


@register.inclusion_tag("memory/_no_model.html")
def no_model_notice(save, always: bool = False) -> dict:
    show = not getattr(settings, "AXIOM_LLM_BASE_URL", "") and (always or save.is_living)
    return {"save": save, "show": show}


@register.filter
def skipped_for_no_model(job) -> bool:
    """True when `job` was skipped because no LLM is configured (its Retry needs one)."""
    return job.status == "skipped" and NO_LLM_SKIP in (job.progress or "")


@register.simple_tag
def llm_configured() -> bool:
    return bool(getattr(settings, "AXIOM_LLM_BASE_URL", ""))
