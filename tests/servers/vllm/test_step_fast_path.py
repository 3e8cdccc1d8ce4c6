"""The step line's fast path (servers/vllm/reader/lines.py's _fast, taken for what a recorder
writes) and the per-value checks behind it give the same step, or both find the line damaged,
on lines a recorder writes and on odd ones."""
from __future__ import annotations

import copy
import json

import pytest

from servers.vllm.reader import lines

T = [1.5, 2.0, 2.25, 3.0]
BASE = {"kind": "step", "step": 7, "t": T, "sched": [[1, 16, 0], [2, 1, 40]], "sampled": [1, 2], "pre": [],
        "free_sched": 28, "blocks": [[1, [30]], [2, [31, 32]]], "fin": [[2, "stop"]], "free": 28, "waiting_n": 1}
ODD = [
    {},                                                   # as written
    {"sched": [[1, 16, 0]]}, {"sched": []}, {"sched": None}, {"sched": [[]]}, {"sched": [[1, 2]]},
    {"sched": [[1, 2, 3, 4]]}, {"sched": [[1, 2], [3, 4, 5, 6]]}, {"sched": [[1, 2, 3], [4, 5]]},
    {"sched": [[1, "16", 0]]}, {"sched": [[1, 16.0, 0]]}, {"sched": [[1, True, 0]]}, {"sched": [[1, None, 0]]},
    {"sched": [[1, 2**60, 0]]}, {"sched": [[1, -2**60, 0]]}, {"sched": [[2**53, 1, 0]]}, {"sched": [[1, 1, 2**53 + 1]]},
    {"sched": [[1, 2**70, 0]]}, {"sched": [[[1], [2], [3]]]}, {"sched": [["a", "b", "c"]]}, {"sched": "abc"},
    {"sched": {"a": 1}}, {"sched": 5},
    {"sampled": None}, {"sampled": [1.0, 2]}, {"sampled": "12"}, {"sampled": []}, {"pre": None}, {"pre": [2]},
    {"pre": 3}, {"running": [1, 2]}, {"running": None}, {"running": 4}, {"waiting": []}, {"waiting": None},
    {"waiting": ["3"]}, {"running": [1], "waiting": [5, 6]},
    {"fin": None}, {"fin": [[2, None]]}, {"fin": [[2]]}, {"fin": [["2", "stop"]]}, {"fin": {"ab": 1}},
    {"blocks": None}, {"blocks": [[1, "bad"]]}, {"blocks": [[1, [30.0]]]}, {"blocks": [["1", [30]]]},
    {"blocks": [[1, []]]}, {"blocks": [[1, [2**63]]]},
    {"t": T[:3]}, {"t": [1, 2.0, 2.25, 3.0]}, {"t": [1.5, None, 2.25, 3.0]}, {"t": [float("nan"), 2.0, 2.25, 3.0]},
    {"t": [float("inf"), 2.0, 2.25, 3.0]}, {"t": None}, {"t": "abcd"},
    {"free": None}, {"free": "3"}, {"free": 2**60}, {"free": True}, {"free_sched": None}, {"cached_free": 4},
    {"cached_free": None}, {"waiting_n": None}, {"waiting_n": 3.0}, {"step": "7"}, {"step": 7.0},
]


def _view(st: dict) -> dict:
    """What the reader uses of a cleaned step, in plain types (the fast path keeps sched flat)."""
    out = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in st.items() if k != "sched"}
    out["blocks"] = [(i, ids.tolist()) for i, ids in st["blocks"]]
    return out


def _clean(obj: dict, fast: bool, monkeypatch):
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(lines, "_fast", lambda o: False)
        try:
            return _view(lines.clean_step(obj))
        except (KeyError, TypeError, ValueError, OverflowError):   # what stream.py takes as damaged
            return "damaged"


@pytest.mark.parametrize("change", ODD, ids=[json.dumps(c)[:40] for c in ODD])
def test_the_fast_path_gives_what_the_per_value_checks_give(change, monkeypatch):
    obj = {**copy.deepcopy(BASE), **copy.deepcopy(change)}
    fast = _clean(copy.deepcopy(obj), True, monkeypatch)
    slow = _clean(copy.deepcopy(obj), False, monkeypatch)
    assert fast == slow


def test_the_fast_path_is_taken_for_what_a_recorder_writes(monkeypatch):
    taken = []
    real = lines._fast
    monkeypatch.setattr(lines, "_fast", lambda o: taken.append(real(o)) or taken[-1])
    st = lines.clean_step(copy.deepcopy(BASE))
    assert taken == [True] and st["sched"] is st["sched_flat"] and st["sched_flat"].tolist() == [1, 16, 0, 2, 1, 40]
