"""The API's universes say who the player persona is: the name ({{user}}) apart from its description."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from studio.universes import services
from studio.world.models import UniverseMeta

pytestmark = pytest.mark.django_db


def tiny_png() -> bytes:
    out = io.BytesIO()
    Image.new("L", (1, 1)).save(out, format="PNG")
    return out.getvalue()


def test_universes_carry_the_persona_with_an_old_value_split(make_api, playtester, universe):
    api = make_api(playtester)
    (item,) = api.get("/api/v1/universes").json()["items"]
    assert item["persona"] == {"name": "", "description": "", "has_portrait": False}
    UniverseMeta.objects.create(
        universe=universe, key="player_character", value="Ilya Voss, a young lighthouse-keeper's apprentice"
    )
    (item,) = api.get("/api/v1/universes").json()["items"]
    assert item["persona"] == {
        "name": "Ilya Voss",
        "description": "a young lighthouse-keeper's apprentice",
        "has_portrait": False,
    }
    services.persona_set(universe=universe, name="Ilya", description="", portrait=tiny_png())
    (item,) = api.get("/api/v1/universes").json()["items"]
    assert item["persona"] == {"name": "Ilya", "description": "", "has_portrait": True}
