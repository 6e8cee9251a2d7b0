"""The turn path's caches keep the memory context byte for byte (issue 33).

What the context reuses from one request to the next is keyed by the text it was computed from (a token count, an
excerpt's term set, the guard's terms, a word's folding) or grows in place (a scope's vocabulary): the same inputs
give the same prompt with the caches cold or warm, and a write, a rewind or a lore edit shows at once.
"""

from __future__ import annotations

import pytest

from studio.memory.embeddings import tokens
from studio.memory.recall import excerpt
from studio.memory.recall.context import next_turn_context
from studio.memory.recall.query_params import ContextParams
from studio.memory.text_caches import text_caches_clear
from studio.memory.retrieval import lexical
from studio.saves.checkpoints import CheckpointManager
from studio.saves.services import turn_append
from studio.universes.services.lore import lore_entry_update

pytestmark = pytest.mark.django_db

ACTION = "I ask Mira about the ledger and the chapel."


def _text(game_save, action=ACTION):
    game_save.refresh_from_db()
    return next_turn_context(game_save=game_save, params=ContextParams(query_text=action, token_budget=900)).text


@pytest.fixture
def played(living, no_runner, vector_memory):
    for number in range(1, 9):
        turn_append(
            game_save=living,
            player_input=f"I walk to the chapel ({number}).",
            narrative=f"Turn {number}: Mira counts the ledger's debts while Kael watches the chapel door.",
            state={"present": ["Mira", "Kael"], "location": "chapel"},
        )
    return living


def test_the_same_inputs_give_the_same_prompt_with_the_caches_cold_or_warm(played, monkeypatch):
    text_caches_clear()
    cold = _text(played)
    assert tokens._count.cache_info().currsize > 0  # the counts were kept
    warm = _text(played)
    assert warm == cold
    # And as counted with no cache at all.
    monkeypatch.setattr(tokens, "_count", tokens._count.__wrapped__)
    monkeypatch.setattr(excerpt, "_term_set", lambda text: frozenset(lexical.index_terms(text)))
    assert _text(played) == cold


def test_a_write_a_rewind_and_a_lore_edit_show_at_once_with_warm_caches(played, author):
    before = _text(played)
    _text(played)  # every cache warm
    turn_append(
        game_save=played,
        player_input="I light a lantern.",
        narrative="Turn 9: a lantern burns blue over the zephyr tower.",
    )
    after_write = _text(played)
    assert "zephyr tower" in after_write and after_write != before
    CheckpointManager().rewind(played, 8)
    assert _text(played) == before  # the rewound turn is gone: the prompt is the one before the write
    assert "under the chapel floor" in before  # the ledger's entry, activated by its key
    entry = played.universe.lore_entries.get(entry_id="ledger")
    lore_entry_update(entry=entry, user=author, text="The ledger is kept in a tin box at the harbour office.")
    edited = _text(played)
    assert "tin box" in edited and "under the chapel floor" not in edited


def test_a_token_count_is_kept_per_counting_method(monkeypatch):
    text = "Kaël owes Mira ten crowns, the ledger says."
    exact = tokens.count_tokens(text)
    monkeypatch.setattr(tokens, "_tokenizer", lambda: None)
    assert tokens.count_tokens(text) == len(tokens._APPROX_TOKEN_RE.findall(text)) != exact
