"""The player's persona: stored apart as a name and a description, split from old values on first use."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from studio.world.models import MemoryMode, UniverseMeta
from studio.saves.narrator.prompt import DEFAULT_INSTRUCTIONS, render_instructions
from studio.saves.services import save_create
from studio.universes import services

from tests.support.images import png

pytestmark = pytest.mark.django_db

LEGACY = "Ilya Voss, a young lighthouse-keeper's apprentice who can hear glass sing"


PNG = png()


def meta_of(universe):
    return dict(universe.meta.values_list("key", "value"))


def test_first_save_writes_the_split_back_and_the_save_copies_it(universe):
    UniverseMeta.objects.create(universe=universe, key="player_character", value=LEGACY)
    game_save = save_create(universe=universe, name="First", memory_mode=MemoryMode.CLASSIC)
    meta = meta_of(universe)
    assert meta["player_character"] == "Ilya Voss"
    assert meta["player_description"] == "a young lighthouse-keeper's apprentice who can hear glass sing"
    assert game_save.meta["player_character"] == "Ilya Voss"
    # The author corrects it; later saves keep the author's choice.
    services.persona_set(universe=universe, name=LEGACY, description="")
    save_create(universe=universe, name="Second")
    assert meta_of(universe)["player_character"] == LEGACY and meta_of(universe)["player_description"] == ""


def test_an_old_save_plays_with_the_name_before_anything_is_written(universe):
    game_save = save_create(universe=universe, name="Old")
    game_save.meta = {**game_save.meta, "player_character": LEGACY}  # copied before personas existed
    game_save.save(update_fields=["meta"])
    from studio.memory.pipeline.living import player_character_for

    assert player_character_for(game_save) == "Ilya Voss"
    assert "player_description" not in meta_of(universe)


def test_the_narrator_gets_the_name_and_the_description_once():
    text = render_instructions(DEFAULT_INSTRUCTIONS, {"player_character": LEGACY, "season": "winter"})
    assert 'The player character ("you") is Ilya Voss.' in text
    assert text.count("hear glass sing") == 1 and "player_description" not in text
    # A template written before personas: the description still reaches the narrator, once.
    text = render_instructions(
        "You are {{player_character}}. Greet {{user}}. {{meta}}",
        {"player_character": "Ilya", "player_description": "Hears glass sing."},
    )
    assert text.startswith("You are Ilya. Greet Ilya.") and text.count("Hears glass sing.") == 1
    text = render_instructions(
        "{{user}} is {{player_description}}", {"player_character": "Ilya", "player_description": "an apprentice"}
    )
    assert text == "Ilya is an apprentice"


def test_persona_set_validates_and_writes_nothing_on_error(universe):
    with pytest.raises(ValidationError) as caught:
        services.persona_set(universe=universe, name="", description="Someone.")
    assert "name" in caught.value.message_dict
    with pytest.raises(ValidationError) as caught:
        services.persona_set(universe=universe, name="Ilya", description="", portrait=b"GIF89a")
    assert "PNG" in caught.value.message_dict["portrait"][0]
    with pytest.raises(ValidationError):
        services.persona_set(universe=universe, name="{{char}}", description="")
    assert "player_character" not in meta_of(universe)
    persona = services.persona_set(universe=universe, name="  Ilya   Voss ", description="Hears glass.", portrait=PNG)
    assert (persona.name, persona.description) == ("Ilya Voss", "Hears glass.")
    assert len(persona.portrait["sha256"]) == 64
    persona = services.persona_set(universe=universe, name="", description="", remove_portrait=True)
    assert persona.name == "" and not {"player_character", "player_description", "player_portrait"} & set(
        meta_of(universe)
    )


def test_persona_form_page_fragment_and_portrait(client, author, playtester, universe):
    client.force_login(author)
    UniverseMeta.objects.create(universe=universe, key="player_character", value=LEGACY)
    page = client.get(f"/universes/{universe.slug}/meta/").content.decode()
    assert 'id="persona-split"' in page and 'value="Ilya Voss"' in page  # the split, offered to correct
    response = client.post(
        f"/universes/{universe.slug}/meta/persona/",
        {"name": "Ilya", "description": "An apprentice.", "portrait": _upload()},
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert html.strip().startswith('<section class="card" id="persona">') and "Saved the persona “Ilya”" in html
    assert 'id="persona-split"' not in html
    portrait = client.get(f"/universes/{universe.slug}/meta/persona/portrait.png")
    assert portrait.status_code == 200 and portrait["Content-Type"] == "image/png" and portrait.content == PNG
    response = client.post(f"/universes/{universe.slug}/meta/persona/", {"name": "", "description": "x"})
    assert response.status_code == 400 and "Give the persona a name" in response.content.decode()
    assert meta_of(universe)["player_description"] == "An apprentice."
    client.force_login(playtester)
    assert client.post(f"/universes/{universe.slug}/meta/persona/", {"name": "X"}).status_code == 403


def _upload():
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("me.png", PNG, content_type="image/png")
