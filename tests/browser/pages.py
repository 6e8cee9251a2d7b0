"""Every studio page, with data behind it: the page walk of the phone-width and axe tests.

`build_world` fills one universe and one save so every page has something to show (lore
entries with revisions, a deleted entry, metadata with an imported card, missions, a living
save with turns, facts, beliefs, mental models, jobs, recorded queries, memory chunks, an API
token). `studio_pages` walks the URL configuration itself, like tests/test_login_required.py,
so a new page is covered the moment it is added: a URL parameter the walk cannot fill, or a
URL that answers GET with something other than a page and is not listed in `NOT_PAGES`,
fails the test until it is taught here. `overflow` and `duplicate_ids` are the two checks
every page test runs on a loaded page (no sideways scrolling, no id twice).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

# Where `screenshot` writes, and the phone-width tests' viewport (CSS pixels).
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PHONE = {"width": 390, "height": 844}

# URL names that answer GET with no studio page of their own, and why. Anything else that
# does not answer 200 text/html with a whole document fails the walk.
NOT_PAGES = {
    "healthz": "JSON health check",
    "favicon": "redirect to the static icon",
    "logout": "POST only",
    "universes:export_toml": "file download",
    "universes:export_sillytavern": "file download",
    "universes:export_card": "file download",
    "universes:export_card_png": "file download",
    "saves:export": "file download (the save file)",
    "universes:persona_portrait": "the persona's PNG portrait (an image, 404 without one)",
}
# Query strings that put a page in its most filled state (results shown, not an empty form).
QUERIES = {
    "memory:playground": "q=silver+crowns&k=3",
    "memory:context": "q=Mira+asks+about+her+silver+crowns&budget=200",
    "memory:replay": "run=1&turns=10",
    "memory:why_not": "q=silver+crowns&k=1&chunk_id={chunk_id}",
    "saves:rewind_preview": "turn=1",
    "saves:narrator_prompt": "input=I+ask+Mira+about+her+silver+crowns",
    "universes:lore_list": "",
    "universes:lore_tester": "text=ask+Mira+about+the+smuggler",
    "universes:lore_health": "share=20",
}


@dataclass
class World:
    universe: object
    game_save: object
    ids: dict = field(default_factory=dict)


CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": "A guardian of the glade, " + "patient and kind; " * 40,
        "personality": "Warm, protective.",
        "scenario": "The forest at dusk.",
        "first_mes": "*She kneels beside you.* You are safe now.",
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: Seraphina.",
        "tags": ["fantasy", "guardian"],
        "extensions": {"talkativeness": "0.5"},
        "character_book": {
            "name": "The glade",
            "entries": [
                {
                    "id": 0,
                    "keys": ["glade"],
                    "content": "A clearing ringed by old oaks.",
                    "comment": "The Glade",
                    "enabled": True,
                    "insertion_order": 100,
                    "extensions": {},
                },
                {
                    "id": 1,
                    "keys": ["Port Vey"],
                    "content": "Seraphina has never seen the sea.",
                    "comment": "Port Vey",
                    "enabled": True,
                    "insertion_order": 100,
                    "extensions": {},
                },
            ],
        },
    },
}


def card_png(card: dict = CARD) -> bytes:
    """A PNG card as SillyTavern writes one: a portrait with the card in a `chara` tEXt chunk."""
    import base64
    import io

    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    image = Image.new("RGB", (40, 60), (60, 120, 80))
    info = PngInfo()
    info.add_text("chara", base64.b64encode(json.dumps(card).encode()).decode())
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", pnginfo=info)
    return buffer.getvalue()


def build_world(*, universe, game_save, author, vector_memory) -> World:
    """Fill `universe` and `game_save` (the shared fixtures) so every page shows content."""
    from studio.api.services import api_token_create
    from studio.memory.models import Fact, Job, JobKind, JobStatus, MentalModel, Observation, RecordedQuery
    from studio.universes import services
    from studio.saves.models import NarratorAlternative, NarratorDraft, NarratorSnapshot
    from studio.world.models import LoreEntry

    kael = universe.lore_entries.get(entry_id="kael")
    port = universe.lore_entries.get(entry_id="port-vey")
    mira = services.lore_entry_create(
        universe=universe,
        user=author,
        title="Mira",
        kind="character",
        text="Mira lends silver crowns at Port Vey, " + "and remembers every debt owed to her " * 30,
        keys=["Mira", "the moneylender", "silver"],
        links=[port, kael],
    )
    services.lore_entry_create(universe=universe, user=author, title="ash road", kind="place", text="A road of ash.")
    services.lore_entry_update(
        entry=kael, user=author, text="Kaël is a smuggler of salt.", keys=["Kaël", "the smuggler"]
    )
    ghost = services.lore_entry_create(
        universe=universe, user=author, title="Old Lighthouse", kind="place", text="Gone."
    )
    services.lore_entry_delete(entry=ghost, user=author)
    from studio.universes.interchange import character_card

    # An imported PNG card: a Character entry, its portrait, its book apart from "Port Vey".
    services.card_import(
        universe=universe, user=author, book=character_card.parse_card(card_png(), filename="seraphina.png")
    )
    LoreEntry.objects.filter(universe=universe).update(embedding_state="embedded")
    services.missions_set(
        universe=universe,
        universe_mission="Everyone remembers who paid and who did not.",
        missions={"Kaël": "Remembers every debt: owed or owing, " * 6, "Mira": "Remembers prices."},
    )

    game_save.memory_mode = "living"
    game_save.save()
    vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
            {"turn_id": 3, "text": "A storm drowns the harbour lights."},
        ],
    )
    vector_memory.sync_lore(
        game_save.save_id,
        [
            {"entry_id": "mira", "title": "Mira", "text": mira.text},
        ],
    )
    chunk_id = vector_memory.get_chunks(game_save.save_id)[0]["id"]
    facts = [
        Fact.objects.create(
            game_save=game_save,
            turn_id=turn,
            statement=text,
            fact_type="event",
            who=who,
            what="a loan",
            where="Port Vey",
            entities=[who, "Port Vey"],
        )
        for turn, text, who in (
            (1, "Kaël docks at Port Vey.", "Kaël"),
            (2, "Mira lends Kaël ten silver crowns.", "Mira"),
            (3, "A storm drowns the harbour lights.", "Kaël"),
        )
    ]
    belief = Observation.objects.create(
        game_save=game_save,
        statement="Kaël owes Mira ten silver crowns.",
        subject="Kaël",
        proof_count=2,
        sources=[{"fact_id": f.pk, "turn_id": f.turn_id} for f in facts[1:]],
        history=[
            {"action": "CREATE", "turn_id": 2, "statement": "Kaël borrowed money.", "subject": "Kaël"},
            {"action": "UPDATE", "turn_id": 3, "statement": "Kaël owes Mira ten silver crowns.", "subject": "Kaël"},
        ],
        created_turn_id=2,
        updated_turn_id=3,
    )
    Observation.objects.create(
        game_save=game_save,
        statement="Storms close the harbour.",
        subject="",
        proof_count=1,
        sources=[{"fact_id": facts[2].pk, "turn_id": 3}],
        created_turn_id=3,
        updated_turn_id=3,
        stale=True,
    )
    MentalModel.objects.create(
        game_save=game_save,
        subject="Mira",
        summary="A patient moneylender who never forgets a debt.",
        sources=[belief.pk],
        versions=[{"turn_id": 2, "summary": "A moneylender."}],
        created_turn_id=2,
        updated_turn_id=3,
    )
    Job.objects.create(
        kind=JobKind.EMBED_TURN, game_save=game_save, turn_id=1, status=JobStatus.DONE, progress="3 chunks"
    )
    failed = Job.objects.create(
        kind=JobKind.LIVING_TURN,
        game_save=game_save,
        turn_id=3,
        status=JobStatus.FAILED,
        attempts=2,
        error="LLM server unreachable: connection refused " * 3,
        llm_calls=2,
        llm_tokens=512,
    )
    RecordedQuery.objects.create(
        game_save=game_save,
        turn_id=3,
        query_text="What does Kaël owe?",
        params={"k": 3, "source": "engine"},
        result_ids=[chunk_id],
    )
    token, _key = api_token_create(user=author, name="engine on my laptop")
    # The narrator: what it saw at turns 1 and 2 (turn 2's page shows what the two prompts
    # share and marks where turn 2's new part begins), and an open draft on the Console.
    NarratorSnapshot.objects.create(
        game_save=game_save,
        turn_id=1,
        player_input="I dock",
        proposed="You dock at Port Vey.",
        model="scripted",
        system_prompt="You are the narrator of an interactive story.",
        user_prompt="## Memory\n- (nothing yet)",
    )
    NarratorSnapshot.objects.create(
        game_save=game_save,
        turn_id=2,
        player_input="I ask Mira for a loan",
        proposed="Mira lends you ten silver crowns.",
        model="scripted (tests/llm_server.py)",
        latency_ms=40,
        prompt_tokens=310,
        completion_tokens=12,
        prompt_chars=1300,
        system_prompt="You are the narrator of an interactive story.",
        user_prompt="## Memory\n- Kaël docks at Port Vey.",
        context={
            "token_budget": 200,
            "used_tokens": 9,
            "items": [
                {
                    "layer": "narrative",
                    "text": "Kaël docks at Port Vey with contraband.",
                    "tokens": 9,
                    "reason": "rank 1",
                    "included": True,
                    "cut": "",
                },
                {
                    "layer": "lore",
                    "text": mira.text,
                    "tokens": 400,
                    "reason": "rank 1",
                    "included": False,
                    "cut": "over budget: needs 400 tokens, 191 left",
                },
            ],
        },
    )
    draft = NarratorDraft.objects.create(
        game_save=game_save, turn_id=game_save.current_turn + 1, player_input="I pay Mira back"
    )
    NarratorAlternative.objects.create(
        draft=draft, number=1, status="done", text="You count ten crowns into her palm.", model="scripted"
    )
    NarratorAlternative.objects.create(
        draft=draft, number=2, status="failed", text="You count", error="The narration broke off."
    )
    from studio.memory.chapters.models import Chapter
    from studio.memory.knowledge.models import Reveal

    chapter = Chapter.objects.create(
        game_save=game_save, first_turn=1, last_turn=2, closed_turn=2, close_reason="playtester"
    )
    reveal = Reveal.objects.create(game_save=game_save, turn_id=2, entry_id="mira", character="Kaël")
    from studio.saves.memory_tests.services import memory_tests_run
    from studio.universes.memory_tests.services import memory_test_create

    memory_test_create(
        universe=universe,
        data={"name": "kael-knows-mira", "kind": "knows", "character": "Kaël", "entry": "mira", "turn": 2},
    )
    memory_tests_run(game_save=game_save)  # the Tests page shows a verdict with its records
    return World(
        universe=universe,
        game_save=game_save,
        ids={
            "chapter_id": chapter.pk,
            "reveal_id": reveal.pk,
            "name": "Kaël",
            "entry_id": "mira",
            "revision_id": mira.revisions.order_by("pk").first().pk,
            "observation_id": belief.pk,
            "job_id": failed.pk,
            "token_id": token.pk,
            "pk": universe.meta.get(key="character_card").pk,
            "turn_id": 2,
            "chunk_id": chunk_id,
            "draft_id": draft.pk,
            "number": 1,
            "test_name": "kael-knows-mira",
        },
    )


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith(("admin/", "api/", "v1/")):  # v1/: the memory proxy, bearer key only
                continue  # the admin is Django's; the API answers JSON
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), f"{namespace}{entry.name}", entry


def _fill(route: str, pattern: URLPattern, world: World) -> str | None:
    values = dict(world.ids)
    values.update(slug=world.universe.slug, universe_slug=world.universe.slug, save_id=world.game_save.save_id)
    path = "/" + route
    for name in pattern.pattern.converters:
        if name not in values:
            return None
        for form in (f"<slug:{name}>", f"<str:{name}>", f"<int:{name}>", f"<path:{name}>", f"<{name}>"):
            path = path.replace(form, str(values[name]))
    return path


def studio_pages(world: World, user) -> list[tuple[str, str]]:
    """Return (url name, path with query) for every studio page, checked to answer a page.

    Raise AssertionError naming the URLs the walk cannot fill or that answer no page.
    """
    client = Client()
    client.force_login(user)
    pages, unknown, not_pages = [], [], []
    for route, name, pattern in _walk(get_resolver().url_patterns):
        if name in NOT_PAGES:
            continue
        path = _fill(route, pattern, world)
        if path is None:
            unknown.append(route)
            continue
        query = QUERIES.get(name, "").format(**world.ids)
        url = f"{path}?{query}" if query else path
        response = client.get(url)
        if response.status_code == 405:
            continue  # POST only: its result is a page or fragment checked elsewhere
        if response.status_code in (301, 302):
            continue  # without htmx it sends the browser to another page, itself walked
        content = response.content.decode("utf-8", "replace") if "text/html" in response.get("Content-Type", "") else ""
        if response.status_code != 200 or "<html" not in content:
            not_pages.append(f"{name} {url} -> {response.status_code} {response.get('Content-Type')}")
            continue
        pages.append((name, url))
    assert not unknown, f"teach tests/browser/pages.py these URL parameters: {unknown}"
    assert not not_pages, "list these in NOT_PAGES (with why) or make them answer a page:\n" + "\n".join(not_pages)
    return pages


def overflow(page) -> dict:
    """Return the document's widths and the widest elements poking past the viewport."""
    return page.evaluate("""() => {
        const root = document.documentElement, width = root.clientWidth;
        const culprits = [...document.querySelectorAll('body *')]
            .filter(el => el.getBoundingClientRect().right > width + 0.5 && getComputedStyle(el).position !== 'fixed'
                          && ![...el.parentElement ? [el.parentElement] : []].some(p => p.closest('.scroll-x, table, pre, .chart-box')))
            .slice(0, 5).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                             + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : '')
                             + ' right=' + Math.round(el.getBoundingClientRect().right));
        return {scrollWidth: root.scrollWidth, clientWidth: width, culprits};
    }""")


def duplicate_ids(page) -> list[str]:
    """Return a line per id that more than one element of the page carries (a label may then
    point at another form's field)."""
    return page.evaluate("""() => {
        const seen = {};
        document.querySelectorAll('[id]').forEach(el => { seen[el.id] = (seen[el.id] || 0) + 1; });
        return Object.entries(seen).filter(([, n]) => n > 1).map(([id, n]) => `duplicate id "${id}" x${n}`);
    }""")
