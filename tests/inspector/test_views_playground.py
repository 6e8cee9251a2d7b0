"""Search playground (results with explain records and stage timings) and "why not"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studio.memory.models import RecordedQuery

pytestmark = pytest.mark.django_db


@pytest.fixture
def chunks(vector_memory, game_save):
    ids = vector_memory.embed_chunks(
        game_save.save_id,
        [
            {"turn_id": 1, "text": "Kaël docks at Port Vey with a hold of contraband."},
            {"turn_id": 2, "text": "Mira lends Kaël ten silver crowns."},
            {"turn_id": 3, "text": "A storm drowns the harbour lights."},
            {"turn_id": 4, "text": "Kaël repays the silver crowns."},  # after the save's turn 3
            {
                "turn_id": 0,
                "text": "Port Vey is a harbour town.",
                "chunk_type": "lore",
                "metadata_extra": {"entry_id": "port-vey"},
            },
        ],
    )
    return dict(zip(["docks", "loan", "storm", "future", "lore"], ids))


def url(game_save, name="memory:playground"):
    return reverse(name, args=[game_save.save_id])


def test_playground_full_page_shows_results_with_explain_and_timings(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "silver crowns", "k": 3}).content.decode()
    assert "<html" in html and 'id="playground-form"' in html
    assert "Mira lends Kaël ten silver crowns." in html
    assert "Kaël repays" not in html  # turn 4 lies after the save's current turn
    first = html[html.index(f'data-chunk="{chunks["loan"]}"') :]
    assert 'data-final-rank="1"' in first[:200]
    assert 'data-explain="semantic">#1' in first and 'data-explain="lexical">#1' in first
    assert 'data-stage="total"' in html and 'data-stage="semantic"' in html


def test_playground_fragment(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "harbour", "chunk": "lore"}, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="results">') and "<html" not in html
    assert "Port Vey is a harbour town." in html and "storm" not in html  # lore only


def test_playground_horizon_focus_and_exclude_lore(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(
        url(game_save), {"q": "harbour Port Vey", "chunk": "narrative_only", "horizon": 1, "k": 5}
    ).content.decode()
    assert "Kaël docks at Port Vey" in html and "harbour town" not in html and "storm" not in html
    boosted = client.get(url(game_save), {"q": "harbour", "focus": "Mira", "k": 5}).content.decode()
    row = boosted[boosted.index(f'data-chunk="{chunks["loan"]}"') :]
    assert 'data-explain="focus">+' in row[: row.index("</tr>")]


def test_playground_records_for_replay_only_when_asked(client, playtester, game_save, chunks):
    client.force_login(playtester)
    client.get(url(game_save), {"q": "silver crowns"})
    assert not RecordedQuery.objects.exists()
    client.post(url(game_save, "memory:playground_record"), {"q": "silver crowns", "k": 2})  # a POST (issue 18)
    recorded = RecordedQuery.objects.get()
    assert recorded.turn_id == 3 and recorded.params["k"] == 2 and recorded.params["source"] == "playground"
    assert recorded.result_ids[0] == f"chunk:{chunks['loan']}"


def test_why_not_reports_each_arm(client, playtester, game_save, chunks):
    client.force_login(playtester)
    params = {"q": "silver crowns", "k": 1, "chunk_id": chunks["docks"]}
    html = client.get(url(game_save, "memory:why_not"), params, HTTP_HX_REQUEST="true").content.decode()
    assert html.lstrip().startswith('<div id="why-not">') and "<html" not in html
    assert "Not in the top 1" in html
    assert 'data-arm="semantic"' in html and 'data-arm="lexical"' in html
    page = client.get(url(game_save, "memory:why_not"), params).content.decode()
    assert "<html" in page and "Not in the top 1" in page
    top = client.get(url(game_save, "memory:why_not"), {**params, "chunk_id": chunks["loan"]}).content.decode()
    assert "In the results at rank 1 of 1." in top


def test_why_not_explains_a_filtered_chunk(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save, "memory:why_not"), {"q": "crowns", "chunk_id": chunks["future"]}).content.decode()
    assert "after the horizon (turn 3)" in html
    html = client.get(url(game_save, "memory:why_not"), {"q": "crowns", "chunk_id": "nope"}).content.decode()
    assert "no such chunk" in html


def test_playground_horizon_beyond_the_current_turn_is_clamped(client, playtester, game_save, chunks):
    client.force_login(playtester)
    html = client.get(url(game_save), {"q": "silver crowns", "horizon": 99, "k": 10}).content.decode()
    assert "Mira lends Kaël ten silver crowns." in html and "Kaël repays" not in html
    why = client.get(
        url(game_save, "memory:why_not"), {"q": "crowns", "horizon": 99, "chunk_id": chunks["future"]}
    ).content.decode()
    assert "after the horizon (turn 3)" in why


def _row(html: str, chunk_id: str) -> str:
    row = html[html.index(f'data-chunk="{chunk_id}"') :]
    return row[: row.index("</tr>")]


def _cell(row: str, name: str) -> str:
    cell = row[row.index(f'data-explain="{name}">') + len(f'data-explain="{name}">') :]
    return cell[: cell.index("</td>")]


def test_results_show_the_fused_rank_and_rrf_score_beside_the_arm_ranks(client, playtester, game_save, chunks):
    """The Fused column gives each hit's rank after fusion and its RRF score, which is the
    weighted sum of 1 / (rrf_k + rank) over the arm ranks shown beside it."""
    import re

    from studio.memory.vector import get_vector_memory

    config = get_vector_memory().config
    client.force_login(playtester)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(url(game_save), {"q": "silver crowns harbour", "k": 3}, **headers).content.decode()
        assert ">Fused</th>" in html
        fused_ranks = []
        for chunk_id in re.findall(r'<tr class="result" data-chunk="([^"]+)"', html):
            row = _row(html, chunk_id)
            fused = _cell(row, "fused")
            rank, score = re.match(r"#(\d+)<br><span class=\"muted small\">RRF ([0-9.]+)</span>", fused).groups()
            fused_ranks.append(int(rank))
            expected = 0.0
            for arm in ("semantic", "lexical", "context", "turn"):
                arm_rank = re.match(r"#(\d+)", _cell(row, arm))
                if arm_rank:
                    expected += config.weight(arm) / (config.rrf_k + int(arm_rank.group(1)))
            assert float(score) == pytest.approx(expected, abs=6e-5)
        assert fused_ranks == sorted(fused_ranks) and fused_ranks[0] == 1  # no focus, no rerank: fused order


def test_why_not_gives_the_fused_rank_and_score_of_a_chunk_outside_the_results(client, playtester, game_save, chunks):
    """A chunk cut by k=1 gets the fused rank and RRF score it has in a wider search."""
    import re

    client.force_login(playtester)
    wide = client.get(url(game_save), {"q": "silver crowns", "k": 5}).content.decode()
    rank, score = re.match(
        r"#(\d+)<br><span class=\"muted small\">RRF ([0-9.]+)</span>", _cell(_row(wide, chunks["docks"]), "fused")
    ).groups()
    assert int(rank) > 1
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(
            url(game_save, "memory:why_not"), {"q": "silver crowns", "k": 1, "chunk_id": chunks["docks"]}, **headers
        ).content.decode()
        fused = html[html.index('<tr data-arm="fused">') :]
        fused = fused[: fused.index("</tr>")]
        assert f'<td class="num">#{rank}</td><td class="num">{score}</td>' in fused and "outside the top 1" in fused
        assert f"(fused rank {rank})" in html
    top = client.get(
        url(game_save, "memory:why_not"), {"q": "silver crowns", "k": 1, "chunk_id": chunks["loan"]}
    ).content.decode()
    assert (
        '<tr data-arm="fused"><th scope="row">fused (RRF)</th><td class="num">#1</td>' in top and "final rank 1" in top
    )


def test_a_why_not_link_prefills_the_chunk_and_a_search_then_explains_it(client, playtester, game_save, chunks):
    """The timeline links to the search page with `chunk_id`: the page shows the empty query
    form (no "required" error) with the chunk filled in; searching then shows that chunk's
    ranks with the results, full page and fragment."""
    client.force_login(playtester)
    html = client.get(url(game_save), {"chunk_id": chunks["docks"]}).content.decode()
    assert f'id="why-not-chunk" value="{chunks["docks"]}"' in html
    assert 'id="why-not-asked"' in html and f'name="chunk_id" value="{chunks["docks"]}"' in html
    assert "This field is required" not in html and 'class="result"' not in html
    params = {"q": "silver crowns", "k": 1, "chunk_id": chunks["docks"]}
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(url(game_save), params, **headers).content.decode()
        assert (
            f'<div class="card why-not-report" data-chunk="{chunks["docks"]}">' in html and "Not in the top 1" in html
        )
        # The rows' own why-not links ask about their chunk only, not the asked one as well.
        link = html[html.index("ranks in every arm") - 400 : html.index("ranks in every arm")]
        assert link.count("chunk_id=") == 2 and chunks["docks"] not in link  # href and hx-get of the loan row
    assert "why-not-report" not in client.get(url(game_save), {"q": "silver crowns", "k": 1}).content.decode()


def test_playground_says_which_arms_ran_and_why_the_turn_arm_was_skipped(client, playtester, game_save, chunks):
    client.force_login(playtester)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = client.get(url(game_save), {"q": "silver crowns", "k": 3}, **headers).content.decode()
        notes = html[html.index('id="arm-notes"') :]
        notes = notes[: notes.index("</p>")]
        assert "Arms that ran: semantic, lexical, context" in notes
        # One narrative chunk per turn: the turn arm would repeat the lexical arm.
        assert 'data-skipped-arm="turn"' in notes and "one chunk per turn" in notes
