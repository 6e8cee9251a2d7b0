"""How large the save file of a long proxy chat is, against the chat's own text and against whole prompts.

On a throw-away SQLite database, a classic save is played through `POST /v1/chat/completions`
(Django's test client, in this process; the project's scripted OpenAI-compatible server as the
model, answering each message with the next of a fixed set of seeded varied texts) for
`--exchanges` exchanges, each `--input-words` and `--answer-words` long, the whole chat sent
each time as a front end does. Then the save is exported and imported again, and the figures
are printed:

- the chat's text (every input and answer) and its tokens (the studio's token counter);
- the save file's bytes and their ratio to the chat's text, per section, and gzip-compressed
  (the export's `.json.gz`);
- the naive ways, measured in the same run: what the `narrator_snapshots` section holds when
  every snapshot keeps its whole prompt (the sum of the prompts' lengths), as it did before
  snapshots were stored as deltas; and the snapshots' memory contexts and the recorded
  queries written whole (their canonical JSON, as the database keeps them), against which
  the file writes each context and query against its last version of each item
  (`saves/portable/recorded.py`);
- export and import times (this machine, its load printed).

The sizes are deterministic (seeded texts, scripted answers); the times are not.

    .venv/bin/python bench/proxy_save_file.py --json bench/data/proxy_save_file.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import report, setup_django  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=40)
    parser.add_argument("--input-words", type=int, default=200)
    parser.add_argument("--answer-words", type=int, default=1150)
    parser.add_argument("--json", default="")
    parser.add_argument("--dump", default="", help="write the save file here")
    args = parser.parse_args()
    workdir = setup_django()
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    import studio.memory.vector as vector_module
    from studio.api.services import api_token_create
    from studio.memory.embeddings.tokens import count_tokens
    from studio.roles import PLAYTESTERS
    from studio.saves import portable
    from studio.world.models import MemoryMode, Universe
    from studio.memory.models import RecordedQuery
    from studio.saves.models import NarratorSnapshot
    from studio.saves.narrator.snapshots import snapshot_prompts
    from studio.saves.portable.recorded import canonical
    from studio.saves.services import save_create
    from tests.fakes import make_vector_memory
    from tests.llm_server import Reply, ScriptedLLMServer
    from tests.proxy.texts import prose

    vectors = make_vector_memory(Path(workdir) / "bench-chroma", collection_name="bench")
    vector_module.get_vector_memory = lambda: vectors
    answers = iter(prose(1000 + n, args.answer_words) for n in range(10**6))
    server = ScriptedLLMServer(lambda request: Reply(content=next(answers))).start()
    settings.AXIOM_LLM_BASE_URL, settings.AXIOM_LLM_MODEL = server.base_url, "bench-model"
    settings.AXIOM_SAVE_FILE_MAX_BYTES = 256 * 1024 * 1024
    settings.ALLOWED_HOSTS = ["*"]
    user = User.objects.create_user("bench", password="x")
    user.groups.add(Group.objects.get_or_create(name=PLAYTESTERS)[0])
    universe = Universe.objects.create(name="Bench", slug="bench", owner=user)
    _, key = api_token_create(user=user, name="bench")
    client = Client()
    game_save = save_create(universe=universe, name="Long chat", memory_mode=MemoryMode.CLASSIC)
    system = {"role": "system", "content": "You narrate Port Vey.\n{{axiom_memory}}"}
    chat: list[tuple[str, str]] = []
    started = time.perf_counter()
    for n in range(args.exchanges + 1):
        pending = prose(n, args.input_words) if n < args.exchanges else "I sleep."
        messages = [system]
        for player_input, answer in chat:
            messages += [{"role": "user", "content": player_input}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": pending})
        response = client.post(
            "/v1/chat/completions",
            json.dumps({"model": f"axiom/{game_save.save_id}/bench-model", "messages": messages}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 200, response.content
        chat.append((pending, response.json()["choices"][0]["message"]["content"]))
    play_seconds = time.perf_counter() - started
    settled = chat[:-1]
    chat_chars = sum(len(i) + len(a) for i, a in settled)
    tokens = sum(count_tokens(i) + count_tokens(a) for i, a in settled)
    started = time.perf_counter()
    data = portable.save_export(game_save=game_save).read()
    export_seconds = time.perf_counter() - started
    started = time.perf_counter()
    copy = portable.save_import(universe=universe, data=data).game_save
    import_seconds = time.perf_counter() - started
    same = portable.save_export(game_save=copy).read() == data
    if args.dump:
        Path(args.dump).write_bytes(data)
    sections = {
        name: len(json.dumps(body["items"], ensure_ascii=False).encode())
        for name, body in json.loads(data)["sections"].items()
    }
    gzipped = portable.save_export(game_save=game_save, compress=True).read()
    whole_prompts = sum(
        len(system_.encode()) + len(user_.encode()) for system_, user_ in snapshot_prompts(game_save=game_save).values()
    )
    whole = lambda value: len(canonical(value).encode())  # noqa: E731
    whole_contexts = sum(
        whole(context)
        for context in NarratorSnapshot.objects.filter(game_save=game_save).values_list("context", flat=True)
    )
    whole_queries = sum(
        whole(list(row))
        for row in RecordedQuery.objects.filter(game_save=game_save).values_list("query_text", "params", "result_ids")
    )
    candidates = [
        len(context.get("items") or [])
        for context in NarratorSnapshot.objects.filter(game_save=game_save)
        .order_by("turn_id")
        .values_list("context", flat=True)
    ]
    server.stop()
    results = {
        "exchanges": args.exchanges,
        "chat_chars": chat_chars,
        "chat_tokens": tokens,
        "file_bytes": len(data),
        "ratio_to_chat": round(len(data) / chat_chars, 3),
        "sections": sections,
        "gzip_bytes": len(gzipped),
        "gzip_ratio_to_chat": round(len(gzipped) / chat_chars, 3),
        "snapshot_prompts_whole_bytes": whole_prompts,
        "whole_prompts_ratio_to_chat": round(whole_prompts / chat_chars, 2),
        "snapshot_contexts_whole_bytes": whole_contexts,
        "whole_contexts_ratio_to_chat": round(whole_contexts / chat_chars, 2),
        "recorded_queries_whole_bytes": whole_queries,
        "whole_queries_ratio_to_chat": round(whole_queries / chat_chars, 2),
        "context_items_median": sorted(candidates)[len(candidates) // 2] if candidates else 0,
        "reimports_to_the_same_bytes": same,
        "play_seconds": round(play_seconds, 1),
        "export_seconds": round(export_seconds, 2),
        "import_seconds": round(import_seconds, 2),
        "load_average": os.getloadavg(),
    }
    report(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
