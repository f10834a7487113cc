"""The fixed inputs a variant's quality is measured on (shipped in the repository, deterministic).

64 short English sentences, built from 16 subjects and 4 sentence frames (written for Legato;
no outside data). Rerank uses 8 queries over 8 documents each; generate uses 16 prompts. The
same inputs are used for every model and variant, so scores are comparable across them.
"""

from __future__ import annotations

_SUBJECTS = (
    ("the river", "floods the valley every spring"),
    ("a solar panel", "turns sunlight into electricity"),
    ("the library", "lends books to everyone in town"),
    ("a good chef", "tastes the sauce before serving it"),
    ("the vaccine", "trains the immune system to fight a virus"),
    ("a glacier", "carves deep valleys over thousands of years"),
    ("the central bank", "raises interest rates to slow inflation"),
    ("a compiler", "translates source code into machine instructions"),
    ("the orchestra", "rehearses the symphony twice a week"),
    ("a honeybee", "carries pollen from flower to flower"),
    ("the referee", "stops the match after a serious foul"),
    ("a database index", "makes lookups by key much faster"),
    ("the volcano", "released ash high into the atmosphere"),
    ("a bicycle", "is the cheapest way to cross the city"),
    ("the telescope", "observed a galaxy billions of light years away"),
    ("a strong password", "protects the account from being stolen"),
)
_FRAMES = (
    "{s} {p}.",
    "Everyone knows that {s} {p}.",
    "Scientists explained why {s} {p}.",
    "In the news today: {s} {p}, again.",
)


def texts() -> list[str]:
    """The 64 sentences, in a fixed order (subject-major)."""
    out = []
    for subject, predicate in _SUBJECTS:
        for frame in _FRAMES:
            sentence = frame.format(s=subject, p=predicate)
            out.append(sentence[0].upper() + sentence[1:])
    return out


def rerank_queries() -> list[tuple[str, list[str]]]:
    """8 queries, each with 8 documents (one per subject pair, so some relevant, most not)."""
    all_texts = texts()
    out = []
    for q in range(8):
        subject = _SUBJECTS[q * 2][0]
        docs = [all_texts[(q * 9 + d * 7) % len(all_texts)] for d in range(8)]
        out.append((f"What does {subject} do?", docs))
    return out


def prompts() -> list[str]:
    """16 generation prompts, one per subject."""
    return [f"Explain in one sentence why {s} {p}." for s, p in _SUBJECTS]
