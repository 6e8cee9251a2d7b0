"""The `summarize` LLM operation and the job that summarises a closed chapter or an arc.

The operation goes through the same client, spend guard and call log as the living
modules (`TrackedLLM`, `run_operation`, `LLMCall.operation = "summarize"`; its model and
options: `AXIOM_LLM_MODEL_SUMMARIZE`, `AXIOM_LLM_*_SUMMARIZE`). A chapter is told from its
turns (the player's action and the narrative, each capped); an arc from its chapters'
summaries (a child without one is named as such).

The job (`summarize_chapter`, turn = the chapter's last turn) re-reads the row and writes
the summary in one transaction under the save's lock (`JobContext.commit`): a rewind that
dropped the chapter's last turn skips it (nothing written), a playtester's edit made while
it ran stands (the model's text is kept beside it as `generated_summary`). Without a model
the chapter says so (`no_model`) and the job ends skipped. Writing a chapter's summary may
queue its arc's (`maybe_summarize_arc`).
"""

from __future__ import annotations

from django.conf import settings

from studio.memory.chapters.models import Chapter, SummaryStatus
from studio.memory.jobs.ledger import JobSkipped
from studio.memory.llm import get_llm_backend
from studio.memory.llm.operation import Operation, Request, run_operation
from studio.memory.llm.parsing import parse_json_payload

SYSTEM_PROMPT = (
    "You summarize a part of an interactive story for the narrator who continues it. Write in the past tense, "
    'in the second person for the player character ("you"), in at most {sentences} sentences: who did what, '
    "where, what changed, what is still unresolved. Keep names, places, objects and numbers exactly as written; "
    'invent nothing. Answer with JSON: {{"summary": "..."}}.'
)
MAX_TURN_CHARS = 1_500  # of one turn's narrative in the prompt (a long turn's start tells most of it)
MAX_SOURCE_CHARS = 12_000  # of the whole prompt's story text (a small model's window)
SENTENCES = {0: 5, 1: 6}  # a chapter; an arc (and deeper)
SUMMARIZE = Operation(name="summarize", system=SYSTEM_PROMPT, item="summary", activity="chapter summary")


def schema() -> dict:
    return {
        "type": "object",
        "properties": {"summary": {"type": "string"}},
        "required": ["summary"],
        "additionalProperties": False,
    }


def chapter_source(chapter: Chapter) -> str:
    """Return the story text a chapter or an arc is summarised from ("" when there is none)."""
    from studio.memory.chapters.services import children_of
    from studio.world.models import Event

    blocks = []
    if chapter.level == 0:
        events = Event.objects.filter(
            game_save_id=chapter.game_save_id, turn_id__gte=chapter.first_turn, turn_id__lte=chapter.last_turn
        ).order_by("turn_id")
        for event in events:
            narrative = event.narrative.strip()
            if len(narrative) > MAX_TURN_CHARS:
                narrative = narrative[:MAX_TURN_CHARS].rsplit(" ", 1)[0] + " […]"
            action = f"> {event.player_input.strip()}\n" if event.player_input.strip() else ""
            if action or narrative:
                blocks.append(f"Turn {event.turn_id}\n{action}{narrative}")
    else:
        for child in children_of(chapter):
            text = child.summary.strip() if child.has_summary else "(no summary was made of this part)"
            blocks.append(f"Turns {child.first_turn}-{child.last_turn}: {text}")
        if not any(c.has_summary for c in children_of(chapter)):
            return ""
    text = "\n\n".join(blocks)
    if len(text) > MAX_SOURCE_CHARS:  # keep the start and the end: how it began and where it stands
        half = MAX_SOURCE_CHARS // 2
        text = text[:half] + "\n\n[… the middle of this part is left out …]\n\n" + text[-half:]
    return text


def summarize_detailed(llm, chapter: Chapter, source: str) -> tuple[str, Exception | None]:
    """Return (summary, failure) for `source`, the text of `chapter` (never raises)."""
    sentences = SENTENCES.get(chapter.level, SENTENCES[1])
    operation = Operation(
        name=SUMMARIZE.name,
        system=SYSTEM_PROMPT.format(sentences=sentences),
        item=SUMMARIZE.item,
        activity=SUMMARIZE.activity,
    )

    def parse(response) -> str:
        text = (response.text or "").strip()
        try:
            payload = parse_json_payload(text)
        except (ValueError, TypeError):
            payload = None
        summary = payload.get("summary") if isinstance(payload, dict) else (text if not text.startswith("{") else "")
        summary = " ".join(str(summary or "").split())
        if not summary:
            raise ValueError("the model returned an empty summary")
        return summary[:4000]

    def request() -> Request[str]:
        kind = "chapter" if chapter.level == 0 else "arc (the summaries of its parts)"
        prompt = f"Summarize this {kind}, turns {chapter.first_turn}-{chapter.last_turn}.\n\n{source}"
        return Request(prompt=prompt, schema=schema(), parse=parse)

    return run_operation(llm, operation, request, empty="", about=f"turns {chapter.first_turn}-{chapter.last_turn}")


def _set_status(chapter_pk: int, status: str, error: str = "") -> None:
    Chapter.objects.filter(pk=chapter_pk, edited=False).update(summary_status=status, summary_error=error[:2000])


def run_summarize_chapter(ctx):
    """The job handler: summarise the chapter named in the payload (see the module docstring)."""
    from studio.memory.chapters.services import maybe_summarize_arc, parent_arc
    from studio.memory.llm import TrackedLLM
    from studio.memory.pipeline.living import _raise_for

    save = ctx.save()
    chapter_pk = (ctx.job.payload or {}).get("chapter")
    chapter = Chapter.objects.filter(pk=chapter_pk, game_save_id=save.pk).first()
    if chapter is None:
        raise JobSkipped("the chapter no longer exists (a rewind re-opened it); nothing written")
    if chapter.edited:
        raise JobSkipped("the playtester's edited summary stands; nothing written")
    backend = get_llm_backend()
    if backend is None:
        _set_status(chapter.pk, SummaryStatus.NO_MODEL)
        raise JobSkipped("no LLM configured: the chapter says no summary was made")
    ctx.check_timeline(save)
    source = chapter_source(chapter)
    if not source.strip():
        _set_status(chapter.pk, SummaryStatus.EMPTY)
        raise JobSkipped("nothing to summarize (no narrative, or no part of the arc has a summary)")
    llm = TrackedLLM(backend, game_save_id=save.pk, job_id=ctx.job.pk)
    summary, error = summarize_detailed(llm, chapter, source)
    try:
        _raise_for(error, "summarize")
    except Exception as exc:
        if ctx.job.attempts >= settings.AXIOM_JOB_MAX_ATTEMPTS:  # the ledger's last attempt: the page says why
            _set_status(chapter.pk, SummaryStatus.FAILED, str(exc))
        raise

    def write(locked_save):
        row = Chapter.objects.select_for_update().filter(pk=chapter.pk).first()
        if row is None:
            return {"written": False, "why": "the chapter was rewound away"}
        row.generated_summary = summary
        row.summary_model = backend.model_for("summarize") if hasattr(backend, "model_for") else ""
        if not row.edited:
            row.summary, row.summary_status, row.summary_error = summary, SummaryStatus.DONE, ""
        row.save()
        arc = parent_arc(row)
        if arc is not None:
            maybe_summarize_arc(arc=arc, game_save=locked_save)
        return {"written": not row.edited, "chapter": row.pk, "chars": len(summary), "llm_calls": llm.calls}

    ctx.commit(write)
    return None
