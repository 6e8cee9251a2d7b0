"""Focus excerpts (studio/memory/recall/excerpt.py): what they cost per context and what they keep.

For each LoCoMo question (the saves bench/memory_qa.py builds: one utterance a turn, one
chapter per session) the narrator's prompt is built at `--budget` tokens, and the bench prints:

- the time the excerpt step adds to a context (`timings["excerpt_ms"]`: the excerpts and the
  second assembly), against the context's whole time, p50 / p95 / mean;
- how many narrative items are excerpts, and the tokens they save;
- for evidence utterances that reach the narrator only as an excerpt (memory_qa credits them
  like whole ones): how many of the answer's words the excerpt still holds, against the whole
  utterance (LoCoMo's answer normalisation, `memory_qa.normalize_answer`), so what an
  excerpt drops is visible, not assumed; and the studio's evidence share as memory_qa scores
  it beside a strict one that does not count an evidence utterance whose excerpt lost every
  answer word the whole utterance held.

`--following N` sets how many sentences an excerpt keeps after each best one
(`ContextPolicy.excerpt_following`), to measure what the sentence window buys.

    .venv/bin/python bench/excerpt_latency.py [--convs 26,30] [--budget 1500] [--limit 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DEFAULT_LOCOMO, percentile, setup_django  # noqa: E402


def answer_recall(text: str, answer: str, normalize) -> float:
    words = set(normalize(answer))
    return len(words & set(normalize(text))) / len(words) if words else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_LOCOMO))
    parser.add_argument("--convs", default="26,30")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument(
        "--following", type=int, default=None, help="sentences kept after each best one (default: the code's)"
    )
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions per conversation (0: all)")
    args = parser.parse_args()
    setup_django()
    import memory_qa
    from studio.saves.narrator.prompt import NarratorConfig, build_narrator_prompt
    from dataclasses import replace

    from studio.memory.recall import policy
    from studio.world.models import Universe

    if (
        args.following is not None
    ):  # the knob is the code's (no Universe_Meta key): the defaults every context starts from
        policy.DEFAULT_POLICY = replace(policy.DEFAULT_POLICY, excerpt_following=args.following)

    excerpt_ms, total_ms, counts, saved = [], [], [], []
    evidence_whole = evidence_excerpt = 0
    kept_words, whole_words = [], []
    share, strict = [], []
    for conv in args.convs.split(","):
        conversation = memory_qa.load(Path(args.data) / f"{conv}.json")
        universe = Universe.objects.create(name=f"LoCoMo {conv}", slug=f"excerpt-{conv}")
        game_save, _chapters = memory_qa.build_save(conv, conversation, universe)
        dia = {t["turn_id"]: t["dia_id"] for t in conversation["turns"]}
        text = {t["turn_id"]: t["text"] for t in conversation["turns"]}
        for q in conversation["questions"][: args.limit or None]:
            prompt = build_narrator_prompt(
                game_save=game_save, player_input=q["question"], config=NarratorConfig(token_budget=args.budget)
            )
            memory = prompt.memory
            excerpt_ms.append(memory.timings.get("excerpt_ms", 0.0))
            total_ms.append(memory.timings.get("total_ms", 0.0))
            taken = [i for i in memory.included if i.layer == "narrative"]
            excerpts = [i for i in taken if i.why.get("excerpt")]
            counts.append((len(taken), len(excerpts)))
            saved.append(sum(i.why["excerpt"]["whole_tokens"] - i.tokens for i in excerpts))
            lost = set()
            for item in taken:
                if dia.get(item.ref.get("turn_id")) not in q["evidence"]:
                    continue
                if item.why.get("excerpt"):
                    evidence_excerpt += 1
                    kept_words.append(answer_recall(item.text, q["answer"], memory_qa.normalize_answer))
                    whole_words.append(
                        answer_recall(text[item.ref["turn_id"]], q["answer"], memory_qa.normalize_answer)
                    )
                    if whole_words[-1] > 0 and kept_words[-1] == 0:
                        lost.add(dia[item.ref["turn_id"]])
                else:
                    evidence_whole += 1
            reached = {dia[t] for t in {i.ref.get("turn_id") for i in taken} | set(memory.shown_turns) if t in dia}
            share.append(len(reached & set(q["evidence"])) / len(q["evidence"]))
            strict.append(len((reached - lost) & set(q["evidence"])) / len(q["evidence"]))
    n = len(excerpt_ms)
    print(f"LoCoMo {args.convs}: {n} contexts at {args.budget} tokens (the narrator's prompt).")
    print(
        f"excerpt step: p50 {percentile(excerpt_ms, 50):.1f} ms, p95 {percentile(excerpt_ms, 95):.1f} ms, "
        f"mean {statistics.fmean(excerpt_ms):.1f} ms; whole context p50 {percentile(total_ms, 50):.0f} ms, "
        f"mean {statistics.fmean(total_ms):.0f} ms"
    )
    print(
        f"narrative items in the prompt: {statistics.fmean(c[0] for c in counts):.1f} a context, "
        f"{statistics.fmean(c[1] for c in counts):.1f} of them excerpts, saving {statistics.fmean(saved):.0f} tokens"
    )
    print(
        f"evidence utterances in the prompt as narrative memory: {evidence_whole} whole, {evidence_excerpt} as excerpts"
    )
    if kept_words:
        print(
            f"answer words held by those excerpts: {statistics.fmean(kept_words):.3f} "
            f"(the whole utterances: {statistics.fmean(whole_words):.3f}); excerpts holding none of them "
            f"where the whole did: {sum(1 for k, w in zip(kept_words, whole_words) if w > 0 and k == 0)}"
        )
    print(
        f"studio evidence share (memory_qa's measure): {statistics.fmean(share):.3f}; strict (an excerpt that lost "
        f"every answer word the whole held does not count): {statistics.fmean(strict):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
