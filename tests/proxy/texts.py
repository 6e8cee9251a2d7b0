"""Seeded varied prose for long chats (tests/proxy/test_long_chat.py, bench/proxy_save_file.py): the
same text every run, about six characters a word, not so repetitive that any text copies itself."""

from __future__ import annotations

import random

WORDS = (
    "tide harbour lantern ledger smuggler rope gull fog pier salt crate bell dock oar net storm coin debt map "
    "candle mast hull keel anchor sail chart compass beacon reef shoal current wave spray brine kelp cliff cove "
    "quay wharf tavern ale bread cheese knife cloak boot hat scarf glove letter seal wax ink quill key lock door "
    "window stair cellar attic roof chimney smoke ash ember flame spark river bridge road cart horse mule dog cat "
    "rat owl crow heron gull tern crab eel cod herring mackerel oyster whelk mussel clam shell pearl silver gold"
).split()


def prose(seed: int, words: int) -> str:
    """`words` words in sentences of 8 to 16, the same for the same seed."""
    rng = random.Random(seed)
    sentences, out = [], []
    for index in range(words):
        out.append(rng.choice(WORDS))
        if len(out) >= rng.randint(8, 16) or index == words - 1:
            sentences.append(" ".join(out).capitalize() + ".")
            out = []
    return " ".join(sentences)
