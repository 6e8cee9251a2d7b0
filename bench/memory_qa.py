"""End-to-end memory quality: how much of a question's evidence reaches what the narrator reads.

LoCoMo (../shared/data/locomo, never copied into the repository) in the game's shape: one
conversation = one *classic* save, one utterance = one turn (narrative "Speaker: text", plus
"[shares a photo: caption]" when there is one; the session's date as the turn's story time,
state key `date`), the question as the player's action, the save as of the end of the
conversation. For every question of categories 1-4 the bench builds what the narrator would
read at a fixed memory budget (`--budget`, default 1,500 tokens) and scores the share of the
question's annotated evidence utterances that are in the *text* each arm gives its reader (the
studio: the memory exactly as the narrator's prompt prints it, `MemoryContext.text`, the one
renderer), per LoCoMo category, for these arms:

- **studio**: the narrator's prompt (`build_narrator_prompt`, token budget = `--budget`): its
  memory context plus the turns it shows in full (the recent turns / the current chapter);
- **chat window**: the last turns, newest first, while they fit the budget (a plain chat);
- **plain RAG**: the last four turns, then semantic top-k only (the engine's semantic arm,
  as SillyTavern's vector storage), results taken in rank order while they fit what the
  budget leaves after those turns (every arm reads about `--budget` tokens);
- **hybrid fill**: the same, with the engine's own hybrid search (`VectorMemory.query`);
- **studio without chapter summaries**: the studio arm with the story-so-far summaries'
  share set to 0 (`context_share_summary`); identical to *studio* where the code has no
  chapters.

Chapters: where the code has them (`studio.memory.chapters`), each LoCoMo session is one
chapter, closed at its last utterance, and its summary is LoCoMo's own annotated
`session_N_summary`, entered as a playtester's edit (so no model is involved and the
figure is deterministic). A summary holds no dia_id, so it never counts as evidence here:
it only spends budget; the "without summaries" arm shows what that costs.

An utterance is in an arm's text when its text is there verbatim, or, for a focus excerpt
(the studio represents lower-ranked chunks by their sentences that hold the question's
words), when one of its sentences of three words or more is (`in_text`); the strict figure
counts such a partial utterance only if what is there still holds a word of the answer that
the whole utterance held (an excerpt that kept the question's words but lost the answer does
not count). The same rule for every arm (the baselines print whole utterances).

Every arm's tokens are counted with the studio's counter (`count_tokens`) on the text it reads
and printed, so an arm that reads more is visible. Deterministic for a given embedding model
(the real MiniLM the studio ships).

`--real-model N` adds the answer part: N questions (stratified by category, every k-th of
each, the same questions for every arm) answered by the model the AXIOM_LLM_* variables point
at from each arm's text (the studio: its memory sections as the narrator prompt lays them
out; a baseline: its turns in order), temperature 0, scored with LoCoMo's answer token F1
(without its stemming). One call per question and arm: ~30 s each on the local 1.5B model.

    .venv/bin/python bench/memory_qa.py [--convs 26,30] [--budget 1500] [--json bench/data/memory_qa.json]
        [--real-model 50]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, locomo_save, parse_meta_pairs, setup_django  # noqa: E402

EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
ARMS = ("studio", "chat window", "plain RAG", "hybrid fill", "studio without chapter summaries")


def load(path: Path) -> dict:
    """Return the conversation as turns, sessions and questions (evidence ids that exist only)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns = []  # {turn_id, dia_id, text, date, session}
    sessions = []  # {number, first, last, date, summary}
    number = 1
    while f"session_{number}" in data:
        first = len(turns) + 1
        date = data.get(f"session_{number}_date_time", "")
        for utterance in data[f"session_{number}"]:
            text = f"{utterance['speaker']}: {utterance['text']}"
            if utterance.get("blip_caption"):
                text += f" [shares a photo: {utterance['blip_caption']}]"
            turns.append(
                {
                    "turn_id": len(turns) + 1,
                    "dia_id": utterance["dia_id"],
                    "text": text,
                    "date": date,
                    "session": number,
                }
            )
        sessions.append(
            {
                "number": number,
                "first": first,
                "last": len(turns),
                "date": date,
                "summary": data.get(f"session_{number}_summary", ""),
            }
        )
        number += 1
    known = {t["dia_id"] for t in turns}
    questions, skipped = [], 0
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = sorted(
            {f"D{a}:{b}" for item in qa.get("evidence", []) for a, b in EVIDENCE.findall(str(item))} & known
        )
        if not evidence:
            skipped += 1
            continue
        questions.append(
            {
                "question": qa["question"],
                "answer": str(qa.get("answer", "")),
                "category": qa["category"],
                "evidence": evidence,
            }
        )
    return {"turns": turns, "sessions": sessions, "questions": questions, "skipped": skipped}


def build_save(conv: str, conversation: dict, universe):
    """Write the conversation as a classic save (`_common.locomo_save`) with one chapter per session."""
    game_save = locomo_save(conv, conversation["turns"], universe)
    return game_save, add_chapters(game_save, conversation)


def add_chapters(game_save, conversation) -> int:
    """One chapter per LoCoMo session, its summary LoCoMo's own (a playtester's edit); 0 without chapters."""
    try:
        from studio.memory.chapters.services import chapter_summary_edit, chapters_close_at
    except ImportError:
        return 0
    closed = 0
    for session in conversation["sessions"]:
        chapter = chapters_close_at(
            game_save=game_save, last_turn=session["last"], reason="bench: LoCoMo session", story_time=session["date"]
        )
        if chapter is not None and session["summary"]:
            chapter_summary_edit(chapter=chapter, text=session["summary"])
        closed += chapter is not None
    return closed


def fill(texts: list[tuple[int, str]], budget: int, count_tokens) -> tuple[set[int], int]:
    """Take (turn_id, text) in order while each fits what is left; return the turns taken and tokens."""
    taken, used = set(), 0
    for turn_id, text in texts:
        if turn_id in taken:
            continue
        tokens = count_tokens(f"(turn {turn_id}) {text}")
        if used + tokens <= budget:
            taken.add(turn_id)
            used += tokens
    return taken, used


def studio_arm(game_save, question: str, budget: int) -> tuple[dict, str]:
    """The studio's memory for the question as the narrator's prompt prints it, and its tokens by layer."""
    from studio.saves.narrator.prompt import NarratorConfig, build_narrator_prompt

    prompt = build_narrator_prompt(
        game_save=game_save, player_input=question, config=NarratorConfig(token_budget=budget)
    )
    layers = defaultdict(int)
    for item in prompt.memory.included:
        layers[item.layer] += item.tokens
    return dict(layers), prompt.memory.text


SENTENCE_WORDS = 3  # a sentence of an utterance this long or longer, found verbatim, is that utterance in part


def in_text(utterance: str, text: str, answer: str) -> tuple[bool, bool]:
    """(Is the utterance in `text`, whole or by a sentence; does what is there hold the answer the whole held?)."""
    from studio.memory.recall.excerpt import segments_of

    if utterance in text:
        return True, True
    body = utterance.split(": ", 1)[1] if ": " in utterance[:40] else utterance
    kept = [s for s in segments_of(body) if len(s.split()) >= SENTENCE_WORDS and s in text]
    if not kept:
        return False, False
    answer_words = set(normalize_answer(answer))
    whole_held = answer_words & set(normalize_answer(utterance))
    return True, not whole_held or bool(whole_held & set(normalize_answer(" ".join(kept))))


def arm_text(turns: set[int], text: dict[int, str]) -> str:
    """What a baseline arm's reader sees: its turns in order, as the token counts assumed."""
    return "\n".join(f"(turn {t}) {text[t]}" for t in sorted(turns) if t in text)


ANSWER_SYSTEM = (
    "Answer the question using only the memory given. Answer in a few words (a name, a date, a "
    "short phrase), no explanation. If the memory does not say, answer: unknown."
)


def normalize_answer(text: str) -> list[str]:
    """LoCoMo's answer normalization (lower case, no punctuation, no articles), as tokens; no stemming."""
    text = re.sub(r"[^\w\s]", " ", str(text).lower())
    return [w for w in text.split() if w not in {"a", "an", "the", "and"}]


def token_f1(prediction: str, truth: str) -> float:
    """LoCoMo's answer token F1 (without its Porter stemming)."""
    pred, gold = normalize_answer(prediction), normalize_answer(truth)
    common = sum(min(pred.count(w), gold.count(w)) for w in set(pred) & set(gold))
    if not pred or not gold or not common:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def stratified(contexts: list, n: int) -> list:
    """Every k-th question of each category (spread over the conversations), n in all, categories in proportion
    with at least 2 each; the same questions for every arm. Returned round-robin over the categories, so a run
    cut short (or resumed) still holds every category in proportion."""
    by_category = defaultdict(list)
    for row, texts in contexts:
        by_category[row["category"]].append((row, texts))
    total = len(contexts)
    picked = []
    for _category, items in sorted(by_category.items()):
        want = min(len(items), max(2, round(n * len(items) / total)))
        step = len(items) / want
        picked.append([items[int(i * step)] for i in range(want)])
    # Each category's questions at their fractional position (i + 0.5) / count, merged: a prefix of the
    # order holds every category in proportion.
    spread = sorted(
        ((i + 0.5) / len(items), category, i) for category, items in enumerate(picked) for i in range(len(items))
    )
    chosen = [picked[category][i] for _, category, i in spread]
    return chosen


def answered(log: str | None) -> dict[tuple, dict]:
    """{(conv, question, arm): answer row} of a previous run's log, for --resume."""
    if not log or not Path(log).exists():
        return {}
    rows = [json.loads(line) for line in Path(log).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(r["conv"], r["question"], r["arm"]): r for r in rows}


def answer_f1(
    contexts: list, n: int, log: str | None = None, arms: tuple[str, ...] = ARMS, resume: bool = False, base: str = ""
) -> list[dict]:
    """Answer each chosen question from each arm's context with the real model; print mean F1 per arm and category.

    `log`: a JSON-lines file each answer is appended to as it comes (a run cut short keeps them); with `resume`,
    answers already in it are kept and not asked again. The chat window's context is the same for every
    question of a conversation, so its questions are asked together (a prefix-caching server reads it once);
    the other arms are asked question by question. The table counts, per arm, the questions it answered, and
    then only the questions every arm in `arms` answered (the same questions for every arm)."""
    import httpx

    base = base.rstrip("/")
    if not base:
        sys.exit("--real-model needs AXIOM_LLM_BASE_URL (../shared/tools/local-llm start prints it)")
    model = os.environ.get("AXIOM_LLM_MODEL", "local")
    chosen = stratified(contexts, n)
    done = answered(log) if resume else {}
    order = [
        (row, texts, arm)
        for arm in arms
        if arm == "chat window"
        for row, texts in sorted(chosen, key=lambda c: c[0]["conv"])
    ]
    order += [(row, texts, arm) for row, texts in chosen for arm in arms if arm != "chat window"]
    started, asked = time.perf_counter(), 0
    with httpx.Client(timeout=float(os.environ.get("AXIOM_LLM_TIMEOUT", "300"))) as client:
        for row, texts, arm in order:
            key = (row["conv"], row["question"], arm)
            if key in done:
                continue
            body = {
                "model": model,
                "temperature": 0,
                "max_tokens": 32,
                "messages": [
                    {"role": "system", "content": ANSWER_SYSTEM},
                    {"role": "user", "content": f"Memory:\n{texts[arm]}\n\nQuestion: {row['question']}\nShort answer:"},
                ],
            }
            response = client.post(base + "/chat/completions", json=body)
            response.raise_for_status()
            answer = (response.json()["choices"][0]["message"].get("content") or "").strip()
            done[key] = {
                "conv": row["conv"],
                "category": row["category"],
                "question": row["question"],
                "arm": arm,
                "truth": row["answer"],
                "answer": answer,
                "f1": round(token_f1(answer, row["answer"]), 3),
                "model": model,
                "when": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                "load": round(os.getloadavg()[0], 2),
            }
            if log:
                with open(log, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(done[key]) + "\n")
            asked += 1
            print(
                f"{arm}: {row['question'][:60]!r} -> {answer[:40]!r} ({asked} asked, "
                f"{time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
    out = [
        done[(row["conv"], row["question"], arm)]
        for row, _ in chosen
        for arm in arms
        if (row["conv"], row["question"], arm) in done
    ]
    common = [row for row, _ in chosen if all((row["conv"], row["question"], arm) in done for arm in arms)]
    print(
        f"\nAnswer token F1 (LoCoMo's metric, no stemming), model {model} at {base}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}."
    )
    for title, rows in (
        ("every question each arm answered", [row for row, _ in chosen]),
        (f"the {len(common)} questions every arm answered", common),
    ):
        print(f"\n{title}:\n")
        print("| arm | all | " + " | ".join(CATEGORIES.values()) + " |")
        print("|---|---|" + "---|" * len(CATEGORIES))
        for arm in arms:
            scored = [
                (row["category"], done[(row["conv"], row["question"], arm)]["f1"])
                for row in rows
                if (row["conv"], row["question"], arm) in done
            ]
            by = {c: [f for cat, f in scored if cat == c] for c in CATEGORIES}
            cells = " | ".join(f"{sum(v) / len(v):.3f} (n={len(v)})" if v else "-" for v in by.values())
            mean = sum(f for _, f in scored) / len(scored) if scored else 0.0
            print(f"| {arm} | {mean:.3f} (n={len(scored)}) | {cells} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--convs", default="26,30", help="conversation ids (file stems); all five: 26,30,41,42,43")
    parser.add_argument("--budget", type=int, default=1500, help="the narrator's memory budget in tokens")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per conversation (0: all)")
    parser.add_argument("--json", help="write per-question rows to this file")
    parser.add_argument(
        "--real-model",
        type=int,
        default=0,
        metavar="N",
        help="also answer N questions (stratified by category, the same for every arm) with the model "
        "the AXIOM_LLM_* variables point at, from each arm's context, and score token F1",
    )
    parser.add_argument(
        "--arms",
        default=",".join(ARMS),
        help="with --real-model: the arms to answer, comma-separated (default: all five)",
    )
    parser.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Universe_Meta key set on each conversation's universe before the questions (repeatable)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="with --real-model and --json: keep the answers already in the JSON's .answers.jsonl log",
    )
    args = parser.parse_args()
    meta = parse_meta_pairs(parser, args.meta)
    # The model answers the questions only: the studio under test gets none, or closing the sessions' chapters
    # would queue a summary of each from it (the bench enters LoCoMo's own summaries as edits).
    base = os.environ.pop("AXIOM_LLM_BASE_URL", "")
    setup_django()
    from dataclasses import replace

    from studio.memory.embeddings.tokens import count_tokens
    from studio.memory.recall.policy import DEFAULT_POLICY
    from studio.memory.vector import get_vector_memory
    from studio.world.models import Universe, UniverseMeta

    vm = get_vector_memory()
    default_config = vm.config
    scores = {arm: defaultdict(list) for arm in ARMS}
    strict = {arm: defaultdict(list) for arm in ARMS}
    tokens = {arm: [] for arm in ARMS}
    layer_tokens = defaultdict(list)
    rows = []
    contexts: list[tuple[dict, dict[str, str]]] = []  # (row, {arm: what it reads}) for --real-model
    started = time.perf_counter()
    for conv in args.convs.split(","):
        conversation = load(Path(args.data) / f"{conv}.json")
        universe = Universe.objects.create(name=f"LoCoMo {conv}", slug=f"locomo-{conv}")
        for key, value in meta.items():
            UniverseMeta.objects.create(universe=universe, key=key, value=value)
        game_save, chapters = build_save(conv, conversation, universe)
        text = {t["turn_id"]: t["text"] for t in conversation["turns"]}
        last = len(conversation["turns"])
        questions = conversation["questions"][: args.limit or None]
        print(
            f"conversation {conv}: {last} turns, {len(conversation['sessions'])} sessions, {chapters} chapters, "
            f"{len(questions)} questions ({conversation['skipped']} without usable evidence)",
            file=sys.stderr,
        )
        recent = set(range(max(last - 3, 1), last + 1))  # the last four turns, as a chat front end shows them
        # The baselines search as deep as the studio may (one ~20-token chunk per 20 tokens of budget, at least 80),
        # so at a large budget they can fill it too.
        search_k = max(80, args.budget // DEFAULT_POLICY.tokens_per_small_chunk)
        recent_tokens = sum(count_tokens(f"(turn {t}) {text[t]}") for t in recent)
        by_dia = {t["dia_id"]: t["text"] for t in conversation["turns"]}
        for q in questions:
            texts: dict[str, str] = {}
            layers, texts["studio"] = studio_arm(game_save, q["question"], args.budget)
            for layer, value in layers.items():
                layer_tokens[layer].append(value)
            UniverseMeta.objects.update_or_create(
                universe=universe, key="context_share_summary", defaults={"value": "0"}
            )
            _, texts["studio without chapter summaries"] = studio_arm(game_save, q["question"], args.budget)
            if "context_share_summary" in meta:  # back to the run's own value, else to the default
                UniverseMeta.objects.filter(universe=universe, key="context_share_summary").update(
                    value=meta["context_share_summary"]
                )
            else:
                UniverseMeta.objects.filter(universe=universe, key="context_share_summary").delete()
            window = [(t, text[t]) for t in range(last, 0, -1)]
            texts["chat window"] = arm_text(fill(window, args.budget, count_tokens)[0], text)
            for arm, arms in (("plain RAG", ("semantic",)), ("hybrid fill", None)):
                vm.set_config(replace(default_config, arms=arms) if arms else default_config)
                results = vm.query(
                    game_save.save_id, q["question"], k=search_k, current_turn_id=last, exclude_chunk_type="lore"
                )
                ranked = [
                    (r["turn_id"], text[r["turn_id"]])
                    for r in results
                    if r.get("turn_id") in text and r["turn_id"] not in recent
                ]
                taken, _used = fill(ranked, args.budget - recent_tokens, count_tokens)  # the same tokens in all
                texts[arm] = arm_text(taken | set(recent), text)
            vm.set_config(default_config)
            row = {
                "conv": conv,
                "category": q["category"],
                "question": q["question"],
                "evidence": q["evidence"],
                "answer": q["answer"],
            }
            if args.real_model:
                contexts.append((row, texts))
            for arm in ARMS:
                found = [in_text(by_dia[d], texts[arm], q["answer"]) for d in q["evidence"]]
                share = sum(1 for reached, _ in found if reached) / len(found)
                scores[arm][q["category"]].append(share)
                strict[arm][q["category"]].append(sum(1 for _, held in found if held) / len(found))
                tokens[arm].append(count_tokens(texts[arm]))
                row[arm] = round(share, 3)
            rows.append(row)
    elapsed = time.perf_counter() - started

    n = len(rows)
    print(
        f"\nLoCoMo conversations {args.convs}: {n} questions (categories 1-4), memory budget {args.budget} tokens, "
        f"one utterance a turn, as of the conversation's end; {elapsed:.0f} s."
    )
    print(
        "Share of each question's annotated evidence in the text the narrator reads (mean over questions; strict: "
        "a partial utterance counts only if it still holds the answer). Load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}.\n"
    )
    header = " | ".join(f"{CATEGORIES[c]} (n={len(scores['studio'][c])})" for c in CATEGORIES)
    print(f"| arm | all (n={n}) | strict | {header} | tokens read (mean) |")
    print("|---|---|---|" + "---|" * len(CATEGORIES) + "---|")
    for arm in ARMS:
        every = [s for c in CATEGORIES for s in scores[arm][c]]
        held = [s for c in CATEGORIES for s in strict[arm][c]]
        cells = " | ".join(
            f"{sum(scores[arm][c]) / len(scores[arm][c]):.3f}" if scores[arm][c] else "-" for c in CATEGORIES
        )
        print(
            f"| {arm} | {sum(every) / len(every):.3f} | {sum(held) / len(held):.3f} | {cells} | "
            f"{sum(tokens[arm]) / len(tokens[arm]):.0f} |"
        )
    print(
        "\nStudio arm, mean tokens by layer: "
        + ", ".join(f"{layer} {sum(v) / len(rows):.0f}" for layer, v in sorted(layer_tokens.items()))
    )
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"--arms: unknown arm(s) {', '.join(unknown)}; the arms are: {', '.join(ARMS)}")
    answers = (
        answer_f1(
            contexts,
            args.real_model,
            log=(args.json + ".answers.jsonl") if args.json else None,
            arms=arms,
            resume=args.resume,
            base=base,
        )
        if args.real_model
        else []
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"budget": args.budget, "convs": args.convs, "meta": meta, "rows": rows, "answers": answers}, indent=0
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
