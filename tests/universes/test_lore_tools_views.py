"""The key tester, the health tab and the edit-conflict view: full pages and htmx fragments."""

from __future__ import annotations

import re

import pytest

from studio.memory.models import LoreActivation
from studio.world.models import Event, LoreEntry, Save, UniverseMeta
from studio.universes import services

pytestmark = pytest.mark.django_db


def url(universe, suffix=""):
    return f"/universes/{universe.slug}/lore/{suffix}"


def included(html: str) -> list[str]:
    block = html.split('id="tester-included"', 1)[1].split("</ol>", 1)[0] if 'id="tester-included"' in html else ""
    return re.findall(r'data-entry="([^"]+)"', block)


def excluded(html: str) -> dict[str, str]:
    block = html.split('id="tester-excluded"', 1)[1].split("</ul>", 1)[0] if 'id="tester-excluded"' in html else ""
    return dict(re.findall(r'data-entry="([^"]+)" data-code="([^"]+)"', block))


@pytest.fixture
def book(universe):
    LoreEntry.objects.filter(entry_id="kael").update(keys=["Kael", "the Fox"])
    LoreEntry.objects.filter(entry_id="port-vey").update(keys=["Port Vey"], text="A harbour town where Kael hides.")
    LoreEntry.objects.create(
        universe=universe,
        entry_id="hesper",
        title="Hesper Vale",
        keys=["Hesper"],
        secondary_keys=["Copper Hood"],
        selective_logic=0,
        text="An informant.",
    )
    LoreEntry.objects.create(universe=universe, entry_id="rules", title="House rules", constant=True, text="Be fair.")
    LoreEntry.objects.create(
        universe=universe,
        entry_id="rumour",
        title="Rumour",
        keys=["/copper\\s+hood/i"],
        probability=0,
        text="A rumour.",
    )
    LoreEntry.objects.create(
        universe=universe, entry_id="harbour", title="Harbour", keys=["harbour"], text="Ships and gulls."
    )
    return universe


def test_tester_full_page_explains_each_rule(author_client, book):
    html = author_client.get(
        url(book, "tester/"), {"text": "ask Hesper about the Copper Hood and Port Vey"}
    ).content.decode()
    assert "<html" in html and 'hx-trigger="input delay:300ms' in html and 'id="tester-text"' in html
    assert set(included(html)) == {"hesper", "rules", "port-vey", "kael", "harbour"}
    assert "constant" in html and "secondary logic AND ANY holds" in html
    # Port Vey's text names Kael: Kael comes in by recursion from port-vey.
    kael = html.split('data-entry="kael"', 1)[1].split("</li>", 1)[0]
    assert "recursion" in kael and "port-vey" in kael
    assert excluded(html).get("rumour") == "probability"  # the regex matched; the roll at 0% failed
    assert "probability roll" in html


def test_tester_fragment_is_only_the_result(author_client, htmx, book):
    html = author_client.get(url(book, "tester/"), {"text": "ask Hesper about the weather"}, **htmx).content.decode()
    assert "<html" not in html and html.strip().startswith('<div id="tester-result"')
    assert "hesper" not in included(html) and excluded(html).get("hesper") == "secondary"
    assert included(html) == ["rules"]


def test_tester_against_a_save_uses_its_turns_and_sticky_state(author_client, htmx, book, game_save):
    LoreEntry.objects.filter(entry_id="harbour").update(sticky=4)
    Event.objects.filter(game_save=game_save, turn_id=3).update(narrative="They reach Port Vey.")
    params = {"text": "we wait", "save": game_save.save_id}
    html = author_client.get(url(book, "tester/"), params, **htmx).content.decode()
    assert "port-vey" in included(html) and "turn 3 (narrative)" in html
    assert "of “Run 1”" in html
    html = author_client.get(url(book, "tester/"), {**params, "turn": 1}, **htmx).content.decode()
    assert "port-vey" not in included(html)  # no history before turn 1
    # A sticky window recorded at turn 3 keeps "harbour" in at turn 4 without its key.
    from studio.memory.lore_activation import TimedEffect, LoreState, spec_from_entry

    entry = LoreEntry.objects.get(entry_id="harbour")
    state = LoreState(sticky={"harbour": TimedEffect(5, 9, spec_from_entry(entry).version_hash)})
    LoreActivation.objects.create(game_save=game_save, turn_id=3, state=state.to_dict(), activated=["harbour"])
    html = author_client.get(url(book, "tester/"), params, **htmx).content.decode()
    assert "harbour" in included(html) and "sticky since turn 3" in html


def test_tester_refuses_a_save_of_another_universe(author_client, book, author):
    from studio.world.models import Universe

    other = Universe.objects.create(name="Elsewhere", slug="elsewhere", owner=author)
    save = Save.objects.create(universe=other, name="Other", save_id="othersave1")
    assert author_client.get(url(book, "tester/"), {"text": "x", "save": save.save_id}).status_code == 404


def test_lore_book_page_carries_the_tester_and_tabs(author_client, book):
    html = author_client.get(url(book)).content.decode()
    assert 'id="lore-tester"' in html and url(book, "tester/") in html and url(book, "health/") in html


def test_health_without_a_lore_budget_measures_entries_against_the_narrators_budget(author_client, book):
    """No lore_token_budget: an entry is oversized past half the narrator's memory budget, the universe's
    context_budget when set (2,000 tokens unset)."""
    LoreEntry.objects.filter(entry_id="rules").update(token_count=700)

    def oversized() -> str:
        html = author_client.get(url(book, "health/")).content.decode()
        return html.split('id="health-oversized"', 1)[1].split("</section>", 1)[0]

    assert "House rules" not in oversized()  # 700 of 2,000
    UniverseMeta.objects.create(universe=book, key="context_budget", value="1000")
    html = oversized()
    assert "House rules" in html and "700 tokens" in html


def test_health_full_page_and_fragment(author_client, htmx, book, game_save, author):
    LoreEntry.objects.filter(entry_id="harbour").update(keys=["harbour", "Turn"])
    LoreEntry.objects.create(universe=book, entry_id="twin", title="Twin", keys=["Kael"], text="Another Kael.")
    LoreEntry.objects.create(universe=book, entry_id="bad", title="Bad regex", keys=["/un(closed/"], text="x")
    UniverseMeta.objects.create(universe=book, key="lore_token_budget", value="100")
    LoreEntry.objects.filter(entry_id="rules").update(token_count=60)  # over half the budget, fits it
    # Port Vey links to the harbour entry, which is then deleted.
    port = LoreEntry.objects.get(entry_id="port-vey")
    port.links.add(LoreEntry.objects.get(entry_id="harbour"))
    services.lore_entry_delete(entry=LoreEntry.objects.get(entry_id="twin"), user=author)
    twin = LoreEntry.objects.create(universe=book, entry_id="twin", title="Twin", keys=["Kael"], text="Kael again.")
    assert twin
    html = author_client.get(url(book, "health/"), {"save": game_save.save_id}).content.decode()
    assert "<html" in html and "3 turns of 1 save replayed" in html
    regex = html.split('id="health-regex"', 1)[1].split("</section>", 1)[0]
    assert "Bad regex" in regex
    shared = html.split('id="health-shared"', 1)[1].split("</section>", 1)[0]
    assert "<code>kael</code>" in shared and "Twin" in shared and "Kaël" in shared
    oversized = html.split('id="health-oversized"', 1)[1].split("</section>", 1)[0]
    assert "House rules" in oversized and "60 tokens" in oversized
    # Every narration of the fixture save says "Turn N text.": the "Turn" key activates the
    # entry on turns 2 and 3 (turn 1's buffer holds only its own input, "input 1").
    busy = html.split('id="health-busy"', 1)[1].split("</section>", 1)[0]
    assert re.search(
        r'<code>Turn</code></td><td><a [^>]+>Harbour</a></td><td class="num">2</td><td class="num">67%', busy
    )
    never = html.split('id="health-never"', 1)[1].split("</section>", 1)[0]
    assert "Hesper Vale" in never and "House rules" not in never and "Harbour" not in never
    cost = html.split('id="health-cost"', 1)[1].split("</section>", 1)[0]
    assert re.search(r'House rules</a></td><td class="num">60</td><td class="num">3</td><td class="num">180', cost)
    fragment = author_client.get(url(book, "health/"), {"save": "all"}, **htmx).content.decode()
    assert "<html" not in fragment and fragment.strip().startswith('<div id="health-report"')
    assert "3 turns of 1 save replayed" in fragment


def test_health_reports_links_to_deleted_entries(author_client, book, author):
    port = LoreEntry.objects.get(entry_id="port-vey")
    port.links.add(LoreEntry.objects.get(entry_id="harbour"))
    services.lore_entry_delete(entry=LoreEntry.objects.get(entry_id="harbour"), user=author)
    html = author_client.get(url(book, "health/"), {"save": ""}).content.decode()
    links = html.split('id="health-links"', 1)[1].split("</section>", 1)[0]
    assert "Port Vey" in links and "<code>harbour</code>" in links and "restore it" in links
    assert 'id="health-never"' not in html  # no save chosen: book checks only


# --- the conflict view -----------------------------------------------------------------------


def edit_post(entry, **changes):
    data = {
        "title": entry.title,
        "kind": entry.kind,
        "keys": ", ".join(entry.keys),
        "text": entry.text,
        "links": "",
        "base_version": entry.version,
    }
    data.update(changes)
    return data


def full_form_post(universe, entry, **changes) -> dict:
    """What the full edit form posts when the author changes `changes` (activation fields included)."""
    from django import forms as django_forms

    from studio.universes.forms import LoreEntryForm

    form = LoreEntryForm(universe=universe, entry=entry)
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(field, django_forms.BooleanField) and not isinstance(field.widget, django_forms.HiddenInput):
            if value:
                data[name] = "on"
            continue
        if field.disabled:
            continue
        data[name] = "" if value is None else value
    data.update(changes)
    return data


def test_full_form_conflict_shows_both_texts_and_the_choices(author_client, author, universe, sync_calls):
    entry = LoreEntry.objects.get(entry_id="kael")
    data = full_form_post(universe, entry, text="Kaël fears the Hood.")
    form_page = author_client.get(url(universe, "kael/edit/")).content.decode()
    assert 'name="base_version" value="1"' in form_page
    services.lore_entry_update(
        entry=LoreEntry.objects.get(pk=entry.pk), user=author, text="Kaël owes the harbour master.", base_version=1
    )
    response = author_client.post(url(universe, "kael/edit/"), data)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Someone saved this entry while you were editing" in html
    assert "version 2 was saved by <strong>author</strong>" in html
    assert 'data-side="theirs">Kaël owes the harbour master.' in html
    assert 'data-side="mine">Kaël fears the Hood.' in html
    assert '<span class="diff-theirs">- Kaël owes the harbour master.' in html
    assert "Keep theirs" in html and "Overwrite with mine" in html and "Save the merged version" in html
    assert html.count('name="base_version" value="2"') == 2
    assert LoreEntry.objects.get(pk=entry.pk).text == "Kaël owes the harbour master."
    # "Overwrite with mine" posts the carried fields at the new version, and wins.
    overwrite = re.search(r'<form[^>]*class="conflict-overwrite".*?</form>', html, re.S).group(0)
    data = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', overwrite))
    assert data["text"] == "Kaël fears the Hood." and data["activation_shown"] == "True"
    response = author_client.post(url(universe, "kael/edit/"), data)
    assert response.status_code == 302
    stored = LoreEntry.objects.get(pk=entry.pk)
    assert (stored.text, stored.version) == ("Kaël fears the Hood.", 3)


def test_inline_conflict_fragment_and_merged_save(author_client, htmx, author, universe, sync_calls):
    entry = LoreEntry.objects.get(entry_id="kael")
    services.lore_entry_update(
        entry=LoreEntry.objects.get(pk=entry.pk),
        user=author,
        text="Kaël is a smuggler.\nHe owes the harbour master.",
        base_version=1,
    )
    response = author_client.post(
        url(universe, "kael/edit/"), edit_post(entry, text="Kaël is a smuggler.\nHe fears the Hood."), **htmx
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.strip().startswith(f'<tr id="lore-row-{entry.pk}" class="editing conflict-row">')
    assert "<html" not in html and 'hx-target="closest tr"' in html
    merged = re.search(r'<textarea id="merged-\d+" name="text" rows="10">(.*?)</textarea>', html, re.S).group(1)
    assert "He owes the harbour master." in merged and "He fears the Hood." in merged
    response = author_client.post(
        url(universe, "kael/edit/"),
        edit_post(entry, text="Kaël is a smuggler.\nHe owes and fears.", base_version=2),
        **htmx,
    )
    assert f'id="lore-row-{entry.pk}"' in response.content.decode() and "conflict" not in response.content.decode()
    assert LoreEntry.objects.get(pk=entry.pk).text == "Kaël is a smuggler.\nHe owes and fears."


def test_inline_editor_carries_its_version(author_client, htmx, universe):
    html = author_client.get(url(universe, "kael/edit/"), **htmx).content.decode()
    assert 'name="base_version" value="1"' in html
