"""The recording's step lines kept as the text they came as, read back as the step dicts the rest
of the code walks (`rec.steps[k]["sched"]`, oracle_lines, to_workload): parsed again when asked
for. A 360,000-step recording held as dicts of lists took gigabytes; its lines take what
their text takes (the reader's Trace is built from them as they come, see replay.py), and
keeping them costs nothing while reading: they are the lines already split off the file.

A step dict is the line's JSON object checked as lines.clean_step checks it (sched as
[(i, tokens, computed_before)], fin as [(i, reason)], blocks as [(i, [block ids])], lists of
ints, t of 4 times or None), with running / waiting filled in from the last line that wrote
them when it leaves them out (the recorder writes them only when they change).
"""
from __future__ import annotations

import json
from array import array
from collections import Counter
from collections.abc import Sequence

from .lines import clean_step


class StepStore(Sequence):
    """Checked step lines, appended one at a time; a Sequence of step dicts. Beside them, what
    a walk over every step would only count (to_workload's tokens sampled and finish reasons,
    the comparison's waiting_n), noted as each line is taken, so that no walk parses them all
    again for it (`summarized`: every line came with its step dict)."""

    def __init__(self):
        self.lines: list = []            # the lines (bytes or str) as they came
        self.running_at = array("q")     # per step: the step whose line wrote its running list (-1: none)
        self.waiting_at = array("q")
        self.sampled = Counter()         # request index -> tokens it sampled, over every step
        self.ended: dict[int, str] = {}  # request index -> the reason of the last step line that finished it
        self.waiting_n = array("q")      # per step: its line's waiting_n, 0 where it has none
        self.summarized = True

    def append(self, raw, has_running: bool, has_waiting: bool, st: dict | None = None) -> None:
        """Step line `raw`; `st`: its step dict as clean_step made it (for the counts beside)."""
        j = len(self.lines)
        self.lines.append(raw)
        self.running_at.append(j if has_running else (self.running_at[-1] if j else -1))
        self.waiting_at.append(j if has_waiting else (self.waiting_at[-1] if j else -1))
        if st is None:
            self.summarized = False
            return
        if st["sampled"]:
            self.sampled.update(st["sampled"])
        for i, why in st["fin"]:
            self.ended[i] = why
        self.waiting_n.append(st.get("waiting_n", 0))

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[x] for x in range(*j.indices(len(self)))]
        n = len(self.lines)
        if j < 0:
            j += n
        if not 0 <= j < n:
            raise IndexError("step index out of range")
        st = self._parse(j)
        for k, at in (("running", self.running_at), ("waiting", self.waiting_at)):
            if k not in st:
                src = at[j]
                st[k] = self._parse(src)[k] if src >= 0 else []
        return st

    def __iter__(self):
        prev = {"running": [], "waiting": []}
        for j in range(len(self.lines)):
            st = self._parse(j)
            for k in ("running", "waiting"):
                if k in st:
                    prev[k] = st[k]
                else:
                    st[k] = list(prev[k])
            yield st

    def step_line(self, j: int) -> dict:
        """Step j's dict as its own line holds it: running / waiting only where the line wrote them
        (a reader that walks the steps in order fills them in from the last one that did)."""
        return self._parse(j)

    def _parse(self, j: int) -> dict:
        st = clean_step(json.loads(self.lines[j]))
        flat = st.pop("sched_flat")
        st["sched"] = list(zip(flat[0::3], flat[1::3], flat[2::3]))
        for k in ("sampled", "pre", "running", "waiting"):   # lists, as they always were
            if k in st:
                st[k] = st[k].tolist()
        st["blocks"] = [(i, ids.tolist()) for i, ids in st["blocks"]]
        return st

    def nbytes(self) -> int:
        return sum(len(x) for x in self.lines) + 16 * len(self.lines)
