"""The first line where the simulator's oracle lines and a real vLLM trace part, as a test failure
that names each field that differs (used by the tests that hold traces of vLLM's own classes)."""
from __future__ import annotations

import json

import pytest


def assert_same_lines(label: str, ours: list[str], theirs: list[str]) -> None:
    """Fail at the first differing line with {field: (ours, vLLM)}; then on a length mismatch."""
    for a, b in zip(ours, theirs):
        if a != b:
            ja, jb = json.loads(a), json.loads(b)
            pytest.fail(f"{label} line {ja['step']}: "
                        f"{ {k: (ja.get(k), jb.get(k)) for k in {*ja, *jb} if ja.get(k) != jb.get(k)} } (ours, vLLM)")
    assert len(ours) == len(theirs), (label, len(ours), len(theirs))
