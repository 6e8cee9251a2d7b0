"""Real-browser test of save files: download the export from the save header, upload it on the
import page (htmx, multipart), land on the new save, and get the same bytes back from it."""

from __future__ import annotations

import pytest

from studio.saves import portable
from studio.world.models import Save
from tests.saves.portable_support import rich_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_export_then_import_in_the_browser(page, login, playtester, universe, vector_memory, settings, tmp_path):
    settings.AXIOM_JOBS_EAGER, settings.REDIS_URL = True, ""
    failures: list[str] = []
    page.on(
        "response",
        lambda r: r.status >= 400 and not r.url.endswith("/favicon.ico") and failures.append(f"{r.status} {r.url}"),
    )
    page.on("pageerror", lambda exc: failures.append(str(exc)))
    save = rich_save(universe)
    login(page, playtester)
    page.goto(save.get_absolute_url())
    with page.expect_download() as download_info:
        page.click("#save-export-link")
    download = download_info.value
    assert download.suggested_filename == "rich-run-turn-4.axiom-save.json"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    data = path.read_bytes()
    assert data == portable.save_export(game_save=save).read()

    # A broken copy is refused in place, without leaving the page.
    broken = tmp_path / "broken.axiom-save.json"
    broken.write_bytes(data[: len(data) // 3])
    page.goto("/saves/import/save/")
    assert "rebuilt after the import" in page.inner_text("main")
    page.set_input_files("#save-import-file", str(broken))
    page.click("#import-save-form button[type=submit]")
    page.wait_for_selector("#import-save-problems")
    assert "truncated" in page.inner_text("#import-save-problems")
    assert Save.objects.count() == 1

    page.set_input_files("#save-import-file", str(path))
    page.fill("#save-import-name", "Shared bug")
    page.click("#import-save-form button[type=submit]")
    page.wait_for_selector("text=Imported “Shared bug” into Test World")
    imported = Save.objects.get(name="Shared bug")
    assert page.url.endswith(imported.get_absolute_url())
    assert page.inner_text("#save-current-turn") == "4"
    exported = portable.save_export(game_save=imported).read()
    assert exported == data.replace(b'"name":"Rich run"', b'"name":"Shared bug"', 1)
    # The embedding jobs ran at commit: the imported turns are in the vector store.
    narrative = vector_memory.get_chunks(imported.save_id, chunk_type="narrative")
    assert sorted({c["turn_id"] for c in narrative}) == [1, 2, 3, 4]
    assert {c["entry_id"] for c in vector_memory.get_chunks(imported.save_id, chunk_type="lore")} == {
        "kael",
        "port-vey",
    }
    console = [e for e in page.console_errors if not e.startswith("Failed to load resource")]
    assert not failures and not console, f"browser errors: {failures + console}"
