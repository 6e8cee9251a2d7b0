"""One set of limits on every write path: each declared field (`studio/limits.py`), walked with
values at and past its limits through every path that writes it (the JSON API, the pages'
forms, the memory proxy, the transcript importer, the save file), gives the same verdict on
every path, the limit's own. Before, the play-settings page stored a 150,000-character author's
note, the presence and reveal pages NUL and 5,000-character names, the Console and the timeline
a 250,000-character narrative, the proxy a 4 MiB message: each save's export then failed to import.

A path answers True when the value was stored (read back from the database), False when it was
refused with nothing written.
"""

from __future__ import annotations

import copy
import io
import json
from urllib.parse import quote

import pytest
from django.db import connection
from django.test import Client

from studio import limits
from studio.memory.chapters.models import Chapter
from studio.memory.chapters.services import chapter_close
from studio.memory.knowledge.models import Presence, Reveal
from studio.memory.knowledge.reveals import reveal_add
from studio.memory.knowledge.presence import presence_set
from studio.saves import portable
from studio.saves.models import NarratorAlternative, NarratorDraft, PlaySettings
from studio.world.models import Event, MemoryMode, Save, UniverseMeta
from studio.saves.narrator.play_settings import play_settings_update
from studio.saves.services import save_create, turn_append
from tests.llm_server import Reply, serve_as_studio_model

pytestmark = pytest.mark.django_db


def has(queryset, **lookup) -> bool:
    """Whether a row holds the value. PostgreSQL refuses a NUL even in a query: no row can hold one there
    (a path that tried to store it would have failed loudly), so the answer is no."""
    if connection.vendor == "postgresql" and any(
        isinstance(value, str) and "\x00" in value for value in lookup.values()
    ):
        return False
    return queryset.filter(**lookup).exists()


def probes(limit: limits.Limit) -> list:
    """Values at and just past the limit, and the characters it refuses."""
    if limit.kind in ("text", "name"):
        good = "Mira of the docks" if limit.kind == "name" else "The tide turns."
        values = [good, "x" * limit.max_chars, "x" * (limit.max_chars + 1), "Mi\x00ra"]
        if limit.kind == "name":
            values += ["Two\nlines", "Tab\there", "   "]
        return values
    low, high = limit.low, limit.high
    step = 1 if limit.kind == "integer" else 0.25
    return [low, high, high + step, low - step, (low + high) / 2 if limit.kind == "number" else int((low + high) // 2)]


def as_form(value) -> str:
    return str(value)


class World:
    """The users, clients and a save factory the paths share."""

    def __init__(self, universe, playtester, author, make_api):
        self.universe = universe
        self.api = make_api(playtester)
        self.page = Client()
        self.page.force_login(playtester)
        self.author_page = Client()
        self.author_page.force_login(author)

    def save(self, turns: int = 1, name: str = "Walk") -> Save:
        game_save = save_create(universe=self.universe, name=name, memory_mode=MemoryMode.CLASSIC)
        for n in range(1, turns + 1):
            turn_append(game_save=game_save, player_input=f"input {n}", narrative=f"Turn {n} text.")
        return game_save

    def document(self) -> dict:
        """A save file holding every kind of row a declared field lives in."""
        game_save = self.save(turns=2, name="Base")
        play_settings_update(game_save=game_save, changes={"authors_note": "Rain.", "temperature": 0.7})
        presence_set(game_save=game_save, turn_id=1, characters=["Mira"])
        reveal_add(game_save=game_save, turn_id=1, character="Mira", entry_id="kael")
        chapter = chapter_close(game_save=game_save, note="the end of the dock scene")
        Chapter.objects.filter(pk=chapter.pk).update(summary="Edited.", edited=True)
        return json.loads(portable.save_export(game_save=game_save).read())


@pytest.fixture
def world(universe, playtester, author, make_api, settings, monkeypatch, vector_memory):
    monkeypatch.setattr("studio.memory.jobs.dispatch.send", lambda job_id, countdown=0: None)
    settings.AXIOM_LLM_BASE_URL = ""
    return World(universe, playtester, author, make_api)


def imported(world, document) -> bool:
    before = Save.objects.count()
    try:
        portable.save_import(universe=world.universe, data=json.dumps(document).encode())
    except portable.SaveFileError:
        assert Save.objects.count() == before
        return False
    return True


def file_with(world, base, section, key, value, *, index=0) -> bool:
    document = copy.deepcopy(base)
    target = document["save"] if section == "save" else document["sections"][section]["items"][index]
    target[key] = value
    return imported(world, document)


# -- the paths of each field ---------------------------------------------------------------------


def turn_paths(world, base, field):
    """turn.player_input / turn.narrative: API append (and PATCH), Console append, timeline edit,
    proxy message, transcript import, save file; for a narrative also the Console's accept of an
    edited narration (its button, and sending the next action) and the API's `/continue` (which
    stores nothing: True when it answered, False when it refused the narrative)."""
    key = field.split(".")[1]

    def api_append(v):
        game_save = world.save(turns=0)
        body = {"player_input": "go", "narrative": "Done.", key: v}
        world.api.post(f"/api/v1/saves/{game_save.save_id}/turns", body)
        return has(Event.objects.all(), game_save=game_save, **{key: v})

    def console_append(v):
        game_save = world.save(turns=0)
        data = {"player_input": "go", "narrative": "Done.", key: v, "expected_turn_id": "1"}
        world.page.post(f"/saves/{game_save.save_id}/turns/", data)
        return has(Event.objects.all(), game_save=game_save, **{key: v})

    def transcript(v):
        line = json.dumps({"player_input": "go", "narrative": "Done.", key: v})
        upload = io.BytesIO(line.encode())
        upload.name = "t.jsonl"
        world.page.post(
            "/saves/import/transcript/",
            {"universe": world.universe.pk, "name": "T", "memory_mode": "classic", "file": upload},
        )
        return has(Event.objects.all(), game_save__name="T", **{key: v})

    def proxy(v):
        game_save = world.save(turns=0)
        turn = ("go", v) if key == "narrative" else (v, "Done.")
        messages = [
            {"role": "user", "content": turn[0]},
            {"role": "assistant", "content": turn[1]},
            {"role": "user", "content": "On."},
        ]
        world.api.post("/v1/chat/completions", {"model": f"axiom/{game_save.save_id}", "messages": messages})
        return has(Event.objects.all(), game_save=game_save, **{key: v})

    def save_file(v):
        return file_with(world, base, "turns", key, v)

    paths = {
        "api append": api_append,
        "console append": console_append,
        "transcript import": transcript,
        "proxy": proxy,
        "save file": save_file,
    }
    if key == "narrative":

        def api_update(v):
            game_save = world.save()
            world.api.client.patch(
                f"/api/v1/saves/{game_save.save_id}/turns/1",
                json.dumps({"narrative": v}),
                content_type="application/json",
                headers=world.api._headers(),
            )
            return has(Event.objects.all(), game_save=game_save, narrative=v)

        def timeline_edit(v, console=False):
            game_save = world.save()
            world.page.post(
                f"/saves/{game_save.save_id}/turns/1/edit/",
                {"narrative": v, **({"next": "console"} if console else {})},
            )
            return has(Event.objects.all(), game_save=game_save, narrative=v)

        def console_accept(v, by_next_action=False):
            game_save = world.save(turns=0)
            draft = NarratorDraft.objects.create(game_save=game_save, turn_id=1, player_input="go")
            NarratorAlternative.objects.create(draft=draft, number=1, status="done", text="Done.")
            if by_next_action:
                world.page.post(
                    f"/saves/{game_save.save_id}/narrator/",
                    {"accept_draft": str(draft.pk), "number": "1", "narrative": v, "player_input": ""},
                )
            else:
                world.page.post(
                    f"/saves/{game_save.save_id}/narrator/{draft.pk}/accept/", {"number": "1", "narrative": v}
                )
            return has(Event.objects.all(), game_save=game_save, narrative=v)

        def api_continue(v):
            game_save = world.save()
            response = world.api.post(f"/api/v1/saves/{game_save.save_id}/continue", {"narrative": v})
            assert response.status_code in (200, 400), response.content[:300]
            return response.status_code == 200

        paths.update(
            {
                "api update": api_update,
                "timeline edit": timeline_edit,
                "console edit": lambda v: timeline_edit(v, console=True),
                "console accept": console_accept,
                "console accept by the next action": lambda v: console_accept(v, by_next_action=True),
                "api continue": api_continue,
            }
        )
    return paths


def save_name_paths(world, base, field):
    def api_create(v):
        world.api.post("/api/v1/saves", {"universe": world.universe.slug, "name": v})
        return has(Save.objects.all(), name=v)

    def page_create(v):
        world.page.post("/saves/new/", {"universe": world.universe.pk, "name": v, "memory_mode": "classic"})
        return has(Save.objects.all(), name=v)

    def api_fork(v):
        game_save = world.save()
        world.api.post(f"/api/v1/saves/{game_save.save_id}/fork", {"turn_id": 1, "name": v})
        return has(Save.objects.all(), name=v)

    def page_fork(v):
        game_save = world.save()
        world.page.post(f"/saves/{game_save.save_id}/fork/", {"turn": "1", "name": v})
        return has(Save.objects.all(), name=v)

    def api_import(v):
        world.api.client.post(
            f"/api/v1/universes/{world.universe.slug}/saves/import?name={quote(v)}",
            json.dumps(base),
            content_type="application/json",
            headers=world.api._headers(),
        )
        return has(Save.objects.all(), name=v)

    def page_import(v):
        upload = io.BytesIO(json.dumps(base).encode())
        upload.name = "s.axiom-save.json"
        world.page.post("/saves/import/save/", {"file": upload, "universe": world.universe.pk, "name": v})
        return has(Save.objects.all(), name=v)

    def save_file(v):
        return file_with(world, base, "save", "name", v) and has(Save.objects.all(), name=v)

    return {
        "api create": api_create,
        "page create": page_create,
        "api fork": api_fork,
        "page fork": page_fork,
        "api import": api_import,
        "page import": page_import,
        "save file": save_file,
    }


def play_paths(world, base, field):
    key = field.split(".")[1]

    def stored(game_save, v):
        row = PlaySettings.objects.filter(game_save=game_save).first()
        return row is not None and getattr(row, key) == v

    def api(v):
        game_save = world.save()
        world.api.client.patch(
            f"/api/v1/saves/{game_save.save_id}/play-settings",
            json.dumps({key: v}),
            content_type="application/json",
            headers=world.api._headers(),
        )
        return stored(game_save, v)

    def page(v):
        game_save = world.save()
        data = {"authors_note": "", "authors_note_depth": "1", key: as_form(v)}
        world.page.post(f"/saves/{game_save.save_id}/play-settings/", data)
        return stored(game_save, v)

    def save_file(v):
        before = set(PlaySettings.objects.values_list("pk", flat=True))
        ok = file_with(world, base, "play_settings", key, v)
        return ok and PlaySettings.objects.exclude(pk__in=before).filter(**{key: v}).exists()

    return {"api": api, "page": page, "save file": save_file}


def character_paths(world, base, field):
    def presence_page(v):
        game_save = world.save()
        world.page.post(f"/memory/{game_save.save_id}/knowledge/presence/1/", {"present": [v]})
        return any(v in row.characters for row in Presence.objects.filter(game_save=game_save))

    def reveal_page(v):
        game_save = world.save()
        world.page.post(
            f"/memory/{game_save.save_id}/knowledge/reveals/", {"target": "entry:kael", "turn": "1", "character": v}
        )
        return has(Reveal.objects.all(), game_save=game_save, character=v)

    def api_state(v):
        game_save = world.save(turns=0)
        world.api.post(f"/api/v1/saves/{game_save.save_id}/turns", {"narrative": "x", "state": {"present": [v]}})
        return has(Event.objects.all(), game_save=game_save)

    def presence_file(v):
        return file_with(world, base, "presence", "characters", [v])

    def reveal_file(v):
        return file_with(world, base, "reveals", "character", v)

    return {
        "presence page": presence_page,
        "reveal page": reveal_page,
        "api turn state": api_state,
        "save file presence": presence_file,
        "save file reveals": reveal_file,
    }


def chapter_paths(world, base, field):
    key = field.split(".")[1]

    def api(v):
        game_save = world.save()
        if key == "note":
            world.api.post(f"/api/v1/saves/{game_save.save_id}/chapters/close", {"note": v})
            return has(Chapter.objects.all(), game_save=game_save, close_note=v)
        chapter = chapter_close(game_save=game_save)
        world.api.client.patch(
            f"/api/v1/saves/{game_save.save_id}/chapters/{chapter.pk}",
            json.dumps({"summary": v}),
            content_type="application/json",
            headers=world.api._headers(),
        )
        return has(Chapter.objects.all(), pk=chapter.pk, summary=v)

    def page(v):
        game_save = world.save()
        if key == "note":
            world.page.post(f"/saves/{game_save.save_id}/chapters/close/", {"note": v})
            return has(Chapter.objects.all(), game_save=game_save, close_note=v)
        chapter = chapter_close(game_save=game_save)
        world.page.post(f"/saves/{game_save.save_id}/chapters/{chapter.pk}/", {"summary": v})
        return has(Chapter.objects.all(), pk=chapter.pk, summary=v)

    def save_file(v):
        return file_with(world, base, "chapters", "close_note" if key == "note" else "summary", v)

    return {"api": api, "page": page, "save file": save_file}


def persona_paths(world, base, field):
    key = {"persona.name": "player_character", "persona.description": "player_description"}[field]

    def stored(v):
        value = UniverseMeta.objects.filter(universe=world.universe, key=key).values_list("value", flat=True).first()
        UniverseMeta.objects.filter(universe=world.universe, key__startswith="player_").delete()
        return value is not None and value == (" ".join(v.split()) if key == "player_character" else v.strip())

    def persona_page(v):
        data = {"name": v, "description": ""} if key == "player_character" else {"name": "Ilya", "description": v}
        world.author_page.post(f"/universes/{world.universe.slug}/meta/persona/", data)
        return stored(v)

    def meta_editor(v):
        world.author_page.post(f"/universes/{world.universe.slug}/meta/save/", {"key": key, "value": v})
        return stored(v)

    return {"persona page": persona_page, "meta editor": meta_editor}


PATHS = {
    "turn.player_input": turn_paths,
    "turn.narrative": turn_paths,
    "save.name": save_name_paths,
    "play.authors_note": play_paths,
    "play.authors_note_depth": play_paths,
    **{limit.field: play_paths for limit in limits.SAMPLER.values()},
    "character.name": character_paths,
    "chapter.note": chapter_paths,
    "chapter.summary": chapter_paths,
    "persona.name": persona_paths,
    "persona.description": persona_paths,
}


def expected(field: str, value) -> bool:
    """The limit's verdict; a persona's name is stored with its white space collapsed, on every path."""
    if field == "persona.name":
        value = " ".join(value.split())
    if field == "persona.description":
        value = value.strip()
    return not limits.problem(field, value)


def test_every_declared_field_has_its_paths():
    assert set(PATHS) == set(limits.declared())


@pytest.mark.parametrize("field", sorted(PATHS))
def test_every_path_gives_the_limits_verdict(world, field, settings):
    base = world.document()
    paths = PATHS[field](world, base, field)
    if any("proxy" in name for name in paths):
        reply = Reply(content="An answer.")
        with serve_as_studio_model(settings, lambda request: reply):
            verdicts = {
                value: {name: path(value) for name, path in paths.items()} for value in probes(limits.limit(field))
            }
    else:
        verdicts = {value: {name: path(value) for name, path in paths.items()} for value in probes(limits.limit(field))}
    wrong = {
        repr(value)[:40]: {name: got for name, got in got_by_path.items() if got != expected(field, value)}
        for value, got_by_path in verdicts.items()
    }
    wrong = {value: paths_ for value, paths_ in wrong.items() if paths_}
    assert not wrong, f"{field}: paths that disagree with the limit: {wrong}"
    assert any(expected(field, value) for value in verdicts) and not all(expected(field, value) for value in verdicts)


def test_the_walk_reaches_the_database_on_every_path(world, settings):
    """Not vacuous: a good value is stored by each path of a turn's narrative (the proxy's included)."""
    base = world.document()
    paths = turn_paths(world, base, "turn.narrative")
    with serve_as_studio_model(settings, lambda request: Reply(content="An answer.")):
        assert all(path("The tide turns.") for path in paths.values())
        assert not any(path("x" * 200_001) for path in paths.values())


# -- whatever was accepted, round-trips ----------------------------------------------------------

from hypothesis import HealthCheck, given, settings as hypothesis_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TRICKY = st.sampled_from(["\x00", "\n", "\t", "\r", "\x7f", "\u2028", "é", "🚢", "{", "}", "\\", '"', " "])


def text_near(limit: limits.Limit):
    """Short texts of any characters, and texts at and just past the limit's length."""
    short = st.text(st.one_of(st.characters(exclude_categories=("Cs",)), TRICKY), max_size=30)
    if not limit.max_chars:
        return short
    edge = st.builds(
        lambda char, extra: char * (limit.max_chars + extra), st.sampled_from("xé "), st.sampled_from([-1, 0, 1])
    )
    return st.one_of(short, short, edge)


WRITES = st.one_of(
    st.tuples(
        st.just("turn"),
        text_near(limits.TURN_INPUT),
        text_near(limits.TURN_NARRATIVE),
        text_near(limits.CHARACTER_NAME),
    ),
    st.tuples(
        st.just("settings"),
        text_near(limits.AUTHORS_NOTE),
        st.one_of(st.none(), st.integers(-1, 21)),
        st.one_of(st.none(), st.floats(-1, 3), st.booleans(), st.text(max_size=3)),
    ),
    st.tuples(st.just("presence page"), text_near(limits.CHARACTER_NAME)),
    st.tuples(st.just("chapter page"), text_near(limits.CHAPTER_NOTE)),
    st.tuples(st.just("console append"), text_near(limits.TURN_INPUT), text_near(limits.TURN_NARRATIVE)),
)


@hypothesis_settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(writes=st.lists(WRITES, min_size=1, max_size=6))
def test_any_save_the_studio_accepted_exports_and_imports_to_an_equal_save(world, writes):
    game_save = world.save(turns=1, name="Property")
    url = f"/api/v1/saves/{game_save.save_id}"
    for write in writes:
        kind, *values = write
        if kind == "turn":
            player_input, narrative, name = values
            world.api.post(
                f"{url}/turns", {"player_input": player_input, "narrative": narrative, "state": {"present": [name]}}
            )
        elif kind == "settings":
            note, depth, temperature = values
            world.api.client.patch(
                f"{url}/play-settings",
                json.dumps({"authors_note": note, "authors_note_depth": depth, "temperature": temperature}),
                content_type="application/json",
                headers=world.api._headers(),
            )
        elif kind == "presence page":
            game_save.refresh_from_db()
            world.page.post(
                f"/memory/{game_save.save_id}/knowledge/presence/{game_save.current_turn}/", {"present": [values[0]]}
            )
        elif kind == "chapter page":
            world.page.post(f"/saves/{game_save.save_id}/chapters/close/", {"note": values[0]})
        else:
            game_save.refresh_from_db()
            world.page.post(
                f"/saves/{game_save.save_id}/turns/",
                {
                    "player_input": values[0],
                    "narrative": values[1],
                    "expected_turn_id": str(game_save.current_turn + 1),
                },
            )
    game_save.refresh_from_db()
    original = portable.save_export(game_save=game_save).read()
    copy_of = portable.save_import(universe=world.universe, data=original).game_save  # never refused
    assert portable.save_export(game_save=copy_of).read() == original
