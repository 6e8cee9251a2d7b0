"""The continuity guard's checks: who says what, leaks, presence, contradiction candidates and the judge."""

from __future__ import annotations

import json

import pytest

from studio.memory.continuity.guard import continuity_check
from studio.memory.continuity.settings import guard_settings
from studio.memory.continuity.text import read_narration
from studio.memory.facts import Fact, insert_facts
from studio.memory.knowledge.names import character_index
from studio.memory.llm import LLMResponse
from studio.memory.models import LLMCall
from studio.saves.services import turn_append
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.django_db

NO_JUDGE = guard_settings({"continuity_guard_judge": "false"})


@pytest.fixture
def harbour(living, no_runner, fake_vectors):
    """Mira, Kael and Ash at the harbour (turn 1), Kael and Ivo in the chapel (turn 2), Mira and Ash back (turn 3).
    Kael knows the Ledger (known_by); the Night Watch (Mira) knows the Tunnel."""
    for state, text, facts in [
        (
            {"present": ["Mira", "Kael", "Ash"], "location": "harbour"},
            "Kael pays Mira.",
            ["Kael owes Ivo forty silver crowns."],
        ),
        (
            {"present": ["Kael", "Ivo"], "location": "chapel"},
            "Ivo shows Kael a map.",
            ["Ivo hid the map behind the altar."],
        ),
        ({"present": ["Mira", "Ash"], "location": "harbour"}, "Mira waits.", ["Mira waited on the quay."]),
    ]:
        event = turn_append(game_save=living, player_input="go", narrative=text, state=state)
        insert_facts(living.save_id, event.turn_id, [Fact(s) for s in facts])
    living.refresh_from_db()
    return living


def check(save, text, player_input="I look around.", **options):
    options.setdefault("settings", NO_JUDGE)
    options.setdefault("embedder", HashingEmbedder())
    return continuity_check(save, text=text, player_input=player_input, **options)


def test_who_says_or_does_each_sentence(cast):
    index = character_index(cast)
    sentences = read_narration(
        'Kael\'s boat rocks. Then the captain steps in. "The tide," she says. "It turns."\n'
        'Ivo mutters something. He leaves. "Wait," Kay tells Ivo.',
        index,
    )
    assert [(s.speaker, s.role) for s in sentences] == [
        ("", "narration"),  # a possessive is not the subject
        ("Mira", "acts"),  # "the captain" is Mira's key
        ("Mira", "says"),  # the last actor, by a pronoun beside a speech verb
        ("Mira", "says"),  # a quote goes on
        ("Ivo", "acts"),
        ("Ivo", "acts"),  # "He": the last actor
        ("Kael", "says"),  # named beside a speech verb ("Kay" is Kael's key), not the one addressed
    ]
    assert sentences[1].arrives and not sentences[4].arrives


def test_a_model_answering_in_the_addressed_characters_voice_speaks_for_them(cast):
    from studio.memory.continuity.text import addressed_in

    index = character_index(cast)
    assert addressed_in("Captain, what do you know?", index) == "Mira"  # "Captain" for the key "the captain"
    assert addressed_in("Mira and Kael, come here.", index) == ""  # two: nobody in particular
    sentences = read_narration(
        "I have heard of it. It was hidden long ago. Kael laughs.",
        index,
        addressed=addressed_in("Captain, have you heard of the ledger?", index),
    )
    assert [(s.speaker, s.role) for s in sentences] == [("Mira", "says"), ("Mira", "says"), ("Kael", "acts")]
    assert [s.speaker for s in read_narration("I have heard of it.", index)] == [""]  # nobody addressed
    # "Kay, …" speaks to Kael though it names Ivo too; "Yes, …" is his answer, and it goes on in his voice.
    answer = read_narration(
        "Yes, Ivo is alive. She hides in the chapel.", index, addressed=addressed_in("Kay, is Ivo alive?", index)
    )
    assert [(s.speaker, s.role) for s in answer] == [("Kael", "says"), ("Kael", "says")]


def test_a_character_who_does_not_know_a_secret_leaks_it_and_one_who_does_not(harbour):
    found = check(harbour, 'Mira smiles. "The ledger hides the smugglers\' debts under the chapel floor."')
    leaks = found.of_kind("leak")
    assert len(leaks) == 1 and leaks[0].character == "Mira" and leaks[0].item.label() == "lore ledger"
    assert leaks[0].sentence.startswith('"The ledger hides') and "Mira does not know lore ledger" in leaks[0].why
    # Kael is in known_by: the same words are his to say (he is not on scene at turn 3: that is presence, not a leak).
    assert not check(harbour, 'Kael smiles. "The ledger hides the smugglers\' debts under the chapel floor."').of_kind(
        "leak"
    )


def test_echoing_the_players_words_is_not_a_leak(harbour):
    question = "Mira, do the smugglers hide debts under the chapel floor?"
    assert not check(
        harbour, 'Mira frowns. "Smugglers\' debts under the chapel floor? I would not know."', player_input=question
    ).of_kind("leak")


def test_a_turn_the_speaker_did_not_witness_leaks_and_one_they_did_does_not(harbour):
    leak = check(harbour, "Mira says Ivo hid the map behind the altar.").of_kind("leak")
    assert [(f.character, f.item.layer, f.item.turn) for f in leak] in ([("Mira", "fact", 2)], [("Mira", "turn", 2)])
    assert "Mira was not present at turn 2" in leak[0].why
    assert not check(harbour, "Mira says Kael owes Ivo forty silver crowns.").of_kind("leak")  # she was there (turn 1)


def test_the_narration_may_not_tell_the_player_a_secret(harbour):
    leaks = check(harbour, "Under the chapel floor, the ledger hides the smugglers' debts.").of_kind("leak")
    assert [(f.character, f.item.label(), f.score["audience"]) for f in leaks] == [("", "lore ledger", "Ash")]


def test_a_character_off_scene_who_speaks_is_found_and_one_who_arrives_is_not(harbour):
    found = check(harbour, '"Forty crowns," Kael says.').of_kind("presence")
    assert [(f.character, f.item.turn) for f in found] == [("Kael", 3)]
    assert "present at turn 3: Mira, Ash" in found[0].why
    assert not check(harbour, 'Kael steps in from the rain. "Forty crowns," he says.').of_kind("presence")
    assert not check(harbour, 'Mira nods. "Forty crowns."').of_kind("presence")
    assert not check(harbour, "Mira thinks of Ivo and of the chapel.").of_kind("presence")  # named, not acting


def test_without_presence_records_nobody_is_off_scene(cast, no_runner, fake_vectors):
    from studio.world.models import Save

    save = Save.objects.create(universe=cast, name="Plain", save_id="plain", memory_mode="classic")
    turn_append(game_save=save, player_input="go", narrative="The quay is empty.")
    save.refresh_from_db()
    assert not check(save, '"Forty crowns," Kael says.').findings


def test_contradiction_candidates_flips_numbers_the_dead_and_two_places(harbour):
    insert_facts(harbour.save_id, 3, [Fact("Ivo drowned off the quay at dawn.")])
    flipped = check(harbour, "Kael never owed Ivo forty silver crowns.", embedder=None).of_kind("contradiction")
    assert [(f.item.layer, f.item.turn, f.verdict) for f in flipped] == [("fact", 1, "candidate")]
    assert "“not”" in flipped[0].why
    number = check(harbour, "Everyone knows Kael owes Ivo twelve silver crowns.", embedder=None).of_kind(
        "contradiction"
    )
    assert number and "12 against 40 (silver)" in number[0].why
    dead = check(harbour, "Ivo walks in and waves.", embedder=None).of_kind("contradiction")
    assert [(f.character, f.item.text) for f in dead] == [("Ivo", "Ivo drowned off the quay at dawn.")]
    assert not check(harbour, "Mira remembers the day Ivo drowned.", embedder=None).of_kind("contradiction")


class Judge:
    """A backend answering the judge's call with given verdicts; records what it was asked."""

    def __init__(self, verdicts):
        self.verdicts = verdicts
        self.requests = []

    def chat(self, **request):
        self.requests.append(request)
        return LLMResponse(text=json.dumps({"verdicts": self.verdicts}), model="scripted")


def test_the_judge_confirms_only_a_verdict_that_cites_the_item_and_its_turn(harbour):
    text = "Everyone knows Kael never owed Ivo forty silver crowns."
    fact_id = check(harbour, text, embedder=None).of_kind("contradiction")[0].item.ref["fact_id"]
    settings = guard_settings({})
    right = Judge([{"candidate": 1, "contradiction": True, "item": f"fact {fact_id}", "turn": 1, "why": "He owed it."}])
    confirmed = check(harbour, text, embedder=None, settings=settings, llm=right)
    assert [(f.verdict, f.judge) for f in confirmed.of_kind("contradiction")] == [("confirmed", "He owed it.")]
    assert confirmed.judged and confirmed.calls == 1 and right.requests[0]["operation"] == "guard"
    assert f"Item fact {fact_id} (turn 1)" in right.requests[0]["prompt"] and "schema" in right.requests[0]
    wrong_turn = Judge([{"candidate": 1, "contradiction": True, "item": f"fact {fact_id}", "turn": 2, "why": "x"}])
    unjudged = check(harbour, text, embedder=None, settings=settings, llm=wrong_turn).of_kind("contradiction")
    assert unjudged[0].verdict == "candidate" and "did not cite" in unjudged[0].judge
    rejecting = Judge([{"candidate": 1, "contradiction": False, "item": f"fact {fact_id}", "turn": 1, "why": "a lie"}])
    rejected = check(harbour, text, embedder=None, settings=settings, llm=rejecting)
    assert rejected.findings[0].verdict == "rejected" and not rejected.standing


def test_the_guards_own_cap_and_no_model_leave_the_candidates_possible(harbour, settings):
    text = "Everyone knows Kael never owed Ivo forty silver crowns."
    judge = Judge([])
    capped = check(
        harbour, text, embedder=None, settings=guard_settings({"continuity_guard_calls_per_hour": "0"}), llm=judge
    )
    assert not judge.requests and capped.findings[0].verdict == "candidate"
    assert "continuity_guard_calls_per_hour" in capped.notes[0]
    settings.AXIOM_LLM_BASE_URL = ""
    alone = check(
        harbour,
        'Mira: "The ledger hides the smugglers\' debts under the chapel floor." ' + text,
        embedder=None,
        settings=guard_settings({}),
    )
    assert {f.kind for f in alone.findings} == {"leak", "contradiction"} and "no model is connected" in alone.notes[0]
    assert not LLMCall.objects.filter(operation="guard").exists()


def test_the_guards_settings_are_universe_meta_knobs():
    from django.core.exceptions import ValidationError

    from studio.universes.meta_keys import KNOWN_BY_KEY
    from studio.universes.services.universes import meta_validate

    assert guard_settings({}).mode == "warn" and guard_settings({"continuity_guard": "regenerate"}).regenerates
    assert not guard_settings({"continuity_guard": "off"}).on
    assert guard_settings({"continuity_guard": "sometimes"}).mode == "warn"  # invalid: the default
    assert meta_validate(key="continuity_guard", value=" regenerate ") == "regenerate"
    with pytest.raises(ValidationError, match="continuity_guard is one of off, warn, regenerate"):
        meta_validate(key="continuity_guard", value="always")
    assert KNOWN_BY_KEY["continuity_guard_calls_per_hour"].default == "60"
