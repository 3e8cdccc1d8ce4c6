"""A toy tokenizer for the live engine: text <-> token ids, deterministic, no vocabulary file.

The engine's models have random weights (nothing is downloaded), so their tokens mean
nothing; this only makes them readable and lets a person type a prompt.

- decode: each id becomes a pronounceable pseudo-word spelled in base-80 syllables
  (consonant + vowel), e.g. 4242 -> "pobi"; ids are joined by spaces.
- encode: a word that is such a spelling becomes its id again, so encode(decode(ids)) == ids;
  any other word (or punctuation mark) becomes a stable hash of it in
  [MIN_TOKEN_ID, VOCAB_SIZE), the range sim.workload draws prompt ids from.
"""
from __future__ import annotations

import re
import zlib

from .workload import MIN_TOKEN_ID, VOCAB_SIZE

CONSONANTS = "bdfghjklmnprstvz"
VOWELS = "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS]  # 80
_SYL_INDEX = {s: i for i, s in enumerate(SYLLABLES)}
_BASE = len(SYLLABLES)
_WORD = re.compile(r"\w+|[^\w\s]")


def id_to_word(token_id: int) -> str:
    """The pseudo-word of one id (>= 0)."""
    if token_id < 0:
        raise ValueError(f"token ids are >= 0, not {token_id}")
    digits = []
    n = int(token_id)
    while True:
        n, d = divmod(n, _BASE)
        digits.append(SYLLABLES[d])
        if n == 0:
            break
    return "".join(reversed(digits))


def word_to_id(word: str) -> int | None:
    """The id a pseudo-word spells, or None if it is not one (not canonical, or out of range)."""
    if not word or len(word) % 2:
        return None
    n = 0
    for i in range(0, len(word), 2):
        d = _SYL_INDEX.get(word[i:i + 2])
        if d is None:
            return None
        n = n * _BASE + d
    if n >= VOCAB_SIZE or id_to_word(n) != word:
        return None
    return n


def encode(text: str) -> list[int]:
    """Token ids of `text`: one per word or punctuation mark."""
    out = []
    for w in _WORD.findall(text):
        tid = word_to_id(w)
        if tid is None:
            tid = MIN_TOKEN_ID + zlib.crc32(w.lower().encode()) % (VOCAB_SIZE - MIN_TOKEN_ID)
        out.append(tid)
    return out


def decode(ids) -> str:
    """Readable text for token ids."""
    return " ".join(id_to_word(int(t)) for t in ids)
