"""The memory context service (mental models -> beliefs -> facts -> chunks -> lore) and its viewer."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.recall.context import build_memory_context, count_tokens
from studio.memory.recall.layout import LAYOUT, parts_of
from studio.memory.models import Fact, MentalModel, Observation, RecordedQuery
from studio.world.models import MemoryMode

pytestmark = pytest.mark.django_db


@pytest.fixture
def living(game_save, vector_memory):
    game_save.memory_mode = MemoryMode.LIVING
    game_save.save()
    MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="A smuggler drowning in debt to Mira.")
    MentalModel.objects.create(game_save=game_save, subject="", summary="Port Vey is tense after the storm.")
    MentalModel.objects.create(game_save=game_save, subject="Tomas", summary="Not on scene.")
    Observation.objects.create(
        game_save=game_save,
        statement="Kaël owes Mira ten crowns.",
        subject="Kaël",
        sources=[{"fact_id": 1, "turn_id": 2}, {"fact_id": 2, "turn_id": 3}],
    )
    Observation.objects.create(
        game_save=game_save, statement="Kaël hides contraband.", subject="Kaël", sources=[{"fact_id": 3, "turn_id": 1}]
    )
    Observation.objects.create(
        game_save=game_save, statement="Mira is patient.", subject="Mira", sources=[{"fact_id": 2, "turn_id": 2}]
    )
    Observation.objects.create(game_save=game_save, statement="Retired belief.", subject="Kaël", deleted_turn_id=3)
    Observation.objects.create(game_save=game_save, statement="Tomas sells fish.", subject="Tomas")
    Fact.objects.create(
        game_save=game_save, turn_id=2, statement="Mira lends Kaël ten crowns.", entities=["Mira", "Kaël"]
    )
    Fact.objects.create(game_save=game_save, turn_id=3, statement="Kaël curses the storm.", entities=["Kaël"])
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
            {"entry_id": "kael", "title": "Kaël", "text": "Kaël is a smuggler who owes money.", "links": ["port-vey"]},
            {"entry_id": "port-vey", "title": "Port Vey", "text": "A harbour town of fog and debts."},
            {"entry_id": "glass-sea", "title": "The Glass Sea", "text": "A calm sea far to the south."},
        ],
    )
    return game_save


def test_layers_in_recall_order_with_reasons(living):
    context = build_memory_context(
        game_save=living, query_text="Kaël asks Mira about the loan", focus_terms=["Port Vey"], token_budget=5000
    )
    layers = [item.layer for item in context.items]
    # The layout's order (the order the model reads them): the recall hierarchy, most synthetic first.
    order = [(section.name, part.layer) for section in LAYOUT for part in parts_of(section)]
    assert [(i.section, i.layer) for i in context.items] == sorted(
        ((i.section, i.layer) for i in context.items), key=order.index
    )
    assert list(dict.fromkeys(layers)) == [
        "mental_model",
        "belief",
        "fact",
        "narrative",
        "lore",
    ]  # no story: next_turn_context
    assert context.subjects == ["port vey", "kaël", "mira"]
    models = [i for i in context.items if i.layer == "mental_model"]
    assert [m.text.split(":")[0] for m in models] == ["Kaël", "The world"]  # Tomas is not in focus
    assert "named in the query" in models[0].reason
    beliefs = [i.text for i in context.items if i.layer == "belief"]
    assert beliefs == [
        "Kaël owes Mira ten crowns.",
        "Kaël hides contraband.",
        "Mira is patient.",
    ]  # live only, strongest first
    facts = [i for i in context.items if i.layer == "fact"]
    assert {f.ref["fact_id"] for f in facts} == set(Fact.objects.values_list("pk", flat=True))
    narrative = [i for i in context.items if i.layer == "narrative"]
    assert narrative[0].why["final_rank"] == 1 and narrative[0].reason.startswith("narrative chunk, rank 1 (")
    lore = [i for i in context.items if i.layer == "lore"]
    expanded = [i for i in lore if i.why.get("expanded_from")]
    assert [i.ref["entry_id"] for i in lore].count("port-vey") == 1
    hit_ids = [i.ref["entry_id"] for i in lore if not i.why.get("expanded_from")]
    if "kael" in hit_ids and "port-vey" not in hit_ids:
        assert (
            expanded
            and expanded[0].ref["entry_id"] == "port-vey"
            and "linked from lore entry kael" in expanded[0].reason
        )
    assert all(i.included for i in context.items) and context.used_tokens <= 5000
    assert "## Mental models" in context.text


def test_budget_cuts_and_says_why(living):
    full = build_memory_context(game_save=living, query_text="Kaël and Mira", token_budget=10_000)
    # What the action recalled is offered in rounds: the best item of each layer first, so the
    # budget of the best mental model and the best belief takes exactly those two.
    firsts = [next(i for i in full.items if i.layer == layer) for layer in ("mental_model", "belief")]
    first_two = sum(i.tokens for i in firsts)
    tight = build_memory_context(game_save=living, query_text="Kaël and Mira", token_budget=first_two)
    assert tight.used_tokens <= first_two
    assert [i.text for i in tight.included] == [i.text for i in firsts]
    assert tight.cut and all(i.cut.startswith("over budget: needs") for i in tight.cut)
    assert tight.cut_tokens == sum(i.tokens for i in tight.cut)
    assert tight.used_tokens + tight.cut_tokens == full.used_tokens


def test_smaller_later_items_still_fill_the_budget(living):
    MentalModel.objects.filter(subject="Kaël").update(summary="A smuggler. " * 80)
    context = build_memory_context(game_save=living, query_text="Kaël", token_budget=100)
    model = context.items[0]
    # Longer than 40% of the budget: represented by its leading sentences, the cut marked,
    # so it does not crowd out the beliefs.
    assert model.layer == "mental_model" and model.included and model.tokens <= 100 * 40 // 100
    assert model.text.startswith("Kaël: A smuggler.") and "[… cut: the rest of this entry" in model.text
    assert "shortened to its leading sentences" in model.reason
    assert [i.text for i in context.included if i.layer == "belief"][:1] == ["Kaël owes Mira ten crowns."]
    assert context.used_tokens <= 100


def test_classic_save_recalls_only_chunks_and_lore(game_save, vector_memory):
    MentalModel.objects.create(game_save=game_save, subject="Kaël", summary="x")
    vector_memory.embed_chunks(game_save.save_id, [{"turn_id": 1, "text": "Kaël docks."}])
    context = build_memory_context(game_save=game_save, query_text="Kaël")
    assert {i.layer for i in context.items} == {"narrative"}
    assert any("Classic memory mode" in n for n in context.notes)


def test_chunks_after_the_current_turn_never_come_in(living, vector_memory):
    vector_memory.embed_chunks(living.save_id, [{"turn_id": 9, "text": "Kaël silver crowns from the future."}])
    context = build_memory_context(game_save=living, query_text="Kaël silver crowns")
    assert all("future" not in i.text for i in context.items)


def test_record_stores_both_queries(living):
    build_memory_context(game_save=living, query_text="Kaël asks Mira", record=True)
    rows = list(RecordedQuery.objects.order_by("id"))
    assert [r.params.get("exclude_chunk_type") for r in rows] == ["lore", None]
    assert rows[1].params["chunk_type"] == "lore" and all(k.startswith("lore:") for k in rows[1].result_ids)
    assert all(r.turn_id == 3 for r in rows)


def test_count_tokens_counts_something():
    assert count_tokens("Kaël owes Mira ten crowns.") >= 5
    assert count_tokens("") == 0


def test_context_viewer_full_page_and_fragment(client, playtester, living):
    client.force_login(playtester)
    url = reverse("memory:context", args=[living.save_id])
    empty = client.get(url).content.decode()
    assert 'id="context-form"' in empty and "tokens used" not in empty
    page = client.get(url, {"q": "Kaël asks Mira about the loan", "budget": 40}).content.decode()
    assert "<html" in page and 'id="budget-line"' in page and "of 40 tokens used" in page
    assert 'data-layer="mental_model"' in page and "cut: over budget" in page
    fragment = client.get(url, {"q": "Kaël", "focus": "Mira"}, HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="context-result">') and "<html" not in fragment
    assert "Mira is patient." in fragment


def test_context_viewer_records_only_for_playtesters(client, universe, playtester, living):
    from django.contrib.auth.models import User

    reader = User.objects.create_user("reader", password="pw")
    universe.members.add(reader)
    url = reverse("memory:context_record", args=[living.save_id])  # recording is a POST (issue 18)
    client.force_login(reader)
    client.post(url, {"q": "Kaël"})
    assert not RecordedQuery.objects.exists()
    client.force_login(playtester)
    client.post(url, {"q": "Kaël"})
    assert RecordedQuery.objects.count() == 2


def test_record_query_keys_results_stably_and_skips_link_expansions(game_save):
    from studio.memory.recall.search import record_query

    recorded = record_query(
        game_save=game_save,
        query_text="Kaël",
        params={"k": 2, "chunk_type": "lore", "focus_terms": None},
        results=[
            {
                "id": "c1",
                "chunk_type": "lore",
                "entry_id": "kael",
                "text": "Kaël is a smuggler.",
                "explain": {"final_rank": 1},
            },
            {
                "id": "c2",
                "chunk_type": "narrative",
                "entry_id": None,
                "text": "Turn text.",
                "explain": {"final_rank": 2},
            },
            {
                "id": "c3",
                "chunk_type": "lore",
                "entry_id": "port-vey",
                "text": "Port.",
                "explain": {"expanded_from": "kael"},
            },
        ],
    )
    assert recorded.result_ids == ["lore:kael", "chunk:c2"]
    assert recorded.params["labels"]["lore:kael"] == "Kaël is a smuggler."
    assert "focus_terms" not in recorded.params and recorded.turn_id == 3


def test_next_turn_context_reads_the_universe_meta_once(living):
    """The macros, the lore keys' macros, the default focus and the shares share one read of the meta."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from studio.memory.recall.context import next_turn_context
    from studio.memory.recall.query_params import ContextParams

    living.universe.meta.create(key="player_character", value="Kaël")
    with CaptureQueriesContext(connection) as queries:
        context = next_turn_context(game_save=living, params=ContextParams(query_text="Mira and the loan"))
    meta_reads = [q["sql"] for q in queries.captured_queries if "universes_universemeta" in q["sql"]]
    # One for the context, one inside the lore activation's own evaluation (its module's).
    assert len(meta_reads) <= 2
    assert context.focus_terms == ["Kaël"] and context.macros["user"] == "Kaël"


def test_subjects_named_in_the_query_cost_no_query_each(living):
    """Finding the characters a query names reads the living memory's subjects once, not once per name."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def subject_reads(query_text):
        with CaptureQueriesContext(connection) as queries:
            context = build_memory_context(game_save=living, query_text=query_text)
        sql = [q["sql"] for q in queries.captured_queries]
        return context, sum(1 for s in sql if "memory_mentalmodel" in s or "memory_observation" in s)

    one, reads_one = subject_reads("Kaël waits")
    three, reads_three = subject_reads("Kaël waits for Mira and Tomas")
    assert one.subjects == ["kaël"] and three.subjects == ["kaël", "mira", "tomas"]
    assert reads_three == reads_one
    assert three.macros["char"] == "Kaël"  # the name as the living memory writes it, not its key


def test_context_viewer_reads_the_default_query_once(client, playtester, living):
    """Without "q" the last turn's input is both the form's initial value and the query: one read."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from studio.world.models import Event

    last = Event.objects.filter(game_save=living).order_by("-turn_id").first()
    last.player_input = "Kaël counts the crowns"
    last.save(update_fields=["player_input"])
    client.force_login(playtester)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(reverse("memory:context", args=[living.save_id]), {"budget": 500}).content.decode()
    assert "Kaël counts the crowns" in page
    last_turn_reads = [
        q["sql"]
        for q in queries.captured_queries
        if '"saves_event"."player_input"' in q["sql"]
        and '"saves_event"."narrative"' in q["sql"]
        and "LIMIT 1" in q["sql"]
    ]
    assert len(last_turn_reads) == 1
