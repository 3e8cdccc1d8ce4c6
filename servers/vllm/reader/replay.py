"""The recording replayed into the Trace's tables as its lines come (servers/vllm/recording.py's
docstring says how each table is filled).

Most of a recording is batch entries (a busy step schedules tens of requests), so they are not
walked one by one in Python: a step's entries go into flat buffers in one C-level extend, and
only what changes a request's state is replayed as it comes: admissions (the lowest free slot,
in scheduling order), preemptions, finishes, KV blocks taken and given back. What each entry
is (its slot, prefill / decode / recompute, tokens redone) and the requests' first scheduled
and first token are worked out from the buffers with numpy when a Trace is asked for: a
Trace so far at any point, while more lines extend the buffers.

Request ids are held as the request's row number and turned into the id text when a Trace is
made.
"""
from __future__ import annotations

import heapq
from array import array

import numpy as np

from sim.trace import Trace

from .gcpause import no_gc

SOURCE = "vllm"
PHASES = ("t_schedule", "t_model", "t_update")
KINDS = np.array(["prefill", "decode", "recompute"], dtype=object)
PREFILL, DECODE, RECOMPUTE = 0, 1, 2
EVENT_KINDS = np.array(["arrive", "admit", "resume", "preempt", "finish"], dtype=object)
ARRIVE, ADMIT, RESUME, PREEMPT, FINISH = range(5)
ACQUIRE, RELEASE = 1, 2   # sim.kvpool's op codes, as kv_table takes them
_ACQUIRE_BYTE, _RELEASE_BYTE = bytes((ACQUIRE,)), bytes((RELEASE,))
STEP_COLUMNS = ("step", "first_entry", "start", "end", *PHASES, "num_seqs", "running", "waiting", "preempted",
                "finished", "free_blocks", "free_blocks_after_schedule", "cached_free_blocks")
_NAN = float("nan")


class _Req:
    __slots__ = ("row", "add", "computed", "recompute_until", "slot", "running", "admitted_at", "blocks",
                 "preemptions", "finish")

    def __init__(self, row: int, add: dict):
        self.row = row
        self.add = add
        self.computed = 0            # tokens computed, as of its last entry (known at its preemption / finish)
        self.recompute_until = 0
        self.slot = None
        self.running = False
        self.admitted_at = 0         # the entry that admitted it
        self.blocks: list[int] = []
        self.preemptions = 0
        self.finish: tuple | None = None   # (step or None, time, reason)


class _Events:
    __slots__ = ("step", "time", "req", "kind", "detail")

    def __init__(self):
        self.step, self.time, self.req, self.kind = array("q"), array("d"), array("q"), array("b")
        self.detail: list = []

    def add(self, step, t, row, kind, detail):
        self.step.append(step)
        self.time.append(_NAN if t is None else t)
        self.req.append(row)
        self.kind.append(kind)
        self.detail.append(detail)


class TraceBuilder:
    """Take adds, finishes (outside a step) and steps in file order; trace(rec) at any point."""

    def __init__(self):
        self.reqs: dict[int, _Req] = {}
        self.rows: list[_Req] = []
        self.arrived: dict[int, int] = {}    # before_step -> requests added before it
        self.outside: list = []              # finishes outside a step not yet placed: (after_step, seq, line)
        self.n_outside = 0
        self.running: set[int] = set()       # recorder indices holding a slot
        self.free_slots: list[int] = []
        self.next_slot = 0
        self.missing = 0
        # entries: (i, tokens, computed_before) flat, and whether each sampled; left-out entries (requests
        # never added) by index
        self.e_flat, self.e_sampled, self.e_drop = array("q"), array("b"), array("q")
        self.e_count = 0
        # state changes, by the entry index they take effect from: (row, entry, value)
        self.admits = (array("q"), array("q"), array("q"))        # value: slot
        self.preempts = (array("q"), array("q"), array("q"))      # value: recompute_until
        # steps
        # per step, STEP_COLUMNS numbers (exact in float64: the counts are held to 2**53; NaN: unknown)
        self.s_all = array("d")
        self.arrive_ev, self.ev = _Events(), _Events()
        self.fin_ev: list[tuple[int, int, int, str]] = []   # (event index, row, entries before, reason)
        self.kv_s, self.kv_b, self.kv_r, self.kv_o = array("q"), array("q"), array("q"), array("b")
        self.tables = None   # tables.Tables: the Trace's columns worked out so far (trace(keep=True))

    # -- lines ---------------------------------------------------------------------------------
    def add(self, a: dict) -> None:
        i = a["i"]
        old = self.reqs.get(i)
        r = _Req(old.row if old is not None else len(self.rows), a)
        if old is None:
            self.rows.append(r)
        else:
            self.rows[old.row] = r
        self.reqs[i] = r
        k = a["before_step"]
        self.arrived[k] = self.arrived.get(k, 0) + 1
        self.arrive_ev.add(k, a["added"], r.row, ARRIVE, f"{a['prompt_len']} prompt tokens")

    def finish_outside(self, f: dict) -> None:
        self.n_outside += 1   # ties keep the file's order
        heapq.heappush(self.outside, (f["after_step"], self.n_outside, f))

    def _last_computed(self, i: int, r: _Req) -> int:
        """before + tokens of the request's last entry (it has one since its admission), looked
        for from the end, in growing windows (it is mostly in the last step or two)."""
        flat, lo = self.e_flat, 3 * r.admitted_at
        hi, w = len(flat), 96
        while hi > lo:
            start = max(lo, hi - w)
            ids = flat[start:hi:3].tolist()
            if i in ids:
                j = start + 3 * (len(ids) - 1 - ids[::-1].index(i))
                return flat[j + 1] + flat[j + 2]
            hi, w = start, 4 * w
        return r.computed

    def _release(self, step: int, r: _Req) -> None:
        n = len(r.blocks)
        if n:
            self.kv_s.extend([step] * n)
            self.kv_b.extend(reversed(r.blocks))   # vLLM frees a request's blocks tail first
            self.kv_r.extend([r.row] * n)
            self.kv_o.frombytes(_RELEASE_BYTE * n)
            r.blocks = []

    def _finish(self, i: int, r: _Req, reason: str, step, t, ev_step) -> None:
        r.finish = (step, t, reason)
        if r.running:
            r.computed = self._last_computed(i, r)
            self.free_slots.append(r.slot)
            r.running = False
            self.running.discard(i)
        self._release(ev_step, r)
        self.fin_ev.append((len(self.ev.step), r.row, self.e_count, reason))
        self.ev.add(ev_step, t, r.row, FINISH, "")

    def step(self, st: dict, running_n: int, waiting_n: int) -> None:
        """One cleaned step (lines.clean_step); running_n / waiting_n: the lengths of its (filled
        in) lists."""
        k = st["step"]
        t0, t1, t2, t3 = st["t"]
        reqs, ev = self.reqs, self.ev
        out = self.outside
        while out and out[0][0] < k:
            f = heapq.heappop(out)[2]
            r = reqs.get(f["i"])
            if r is not None:
                self._finish(f["i"], r, str(f.get("reason") or "unknown"), None, f.get("t"), k - 1)
        e0 = self.e_count
        pre = st["pre"]
        for i in pre:
            r = reqs.get(i)
            if r is None:
                self.missing += 1
                continue
            if r.running:
                r.computed = self._last_computed(i, r)
                self.free_slots.append(r.slot)
                self.running.discard(i)
            r.recompute_until = max(r.recompute_until, r.computed)
            r.computed = 0
            r.running = False
            r.preemptions += 1
            for buf, v in zip(self.preempts, (r.row, e0, r.recompute_until)):
                buf.append(v)
            self._release(k, r)
            ev.add(k, t0, r.row, PREEMPT, f"recompute {r.recompute_until} tokens")
        flat = st.get("sched_flat")
        if flat is None:   # a step dict made by hand (to_trace of a Recording not read here)
            flat = array("q", [x for e in st["sched"] for x in e])
        ids = flat[0::3]
        n = len(ids)
        if n:
            sampled = st["sampled"]
            if sampled == ids:   # most steps: every entry sampled, in scheduling order
                self.e_sampled.frombytes(b"\x01" * n)
            elif sampled:
                got = set(sampled)
                self.e_sampled.extend([x in got for x in ids])
            else:
                self.e_sampled.frombytes(bytes(n))
            # most steps schedule only requests that hold a slot (all of them added): nothing to admit
            # or leave out
            if not self.running.issuperset(ids):
                uniq = set(ids)
                if not uniq <= reqs.keys():   # entries of requests never added: left out
                    for j, x in enumerate(ids):
                        if x not in reqs:
                            self.e_drop.append(e0 + j)
                            self.missing += 1
                new = uniq - self.running
                if new:
                    new &= reqs.keys()
                    for j, x in enumerate(ids):
                        if x in new:
                            new.discard(x)
                            self._admit(x, reqs[x], e0 + j, k, t0)
            self.e_flat.extend(flat)
            self.e_count += n
            blocks = st["blocks"]
            if blocks:
                # in scheduling order (as the entries took them); a request not scheduled takes none
                if len(blocks) == 1:
                    x, b = blocks[0]
                    order = (x,) if x in ids else ()
                    taken = {x: b}
                else:
                    taken = dict(blocks)
                    order = [x for _, x in sorted((ids.index(x), x) for x in taken if x in ids)]
                got_b, got_r = [], []
                for x in order:
                    b = taken[x]
                    if b:
                        r = reqs.get(x)
                        if r is not None:
                            r.blocks.extend(b)
                            got_b += b
                            got_r += [r.row] * len(b)
                m = len(got_b)
                if m:   # one extend a buffer a step
                    self.kv_s.extend([k] * m)
                    self.kv_b.extend(got_b)
                    self.kv_r.extend(got_r)
                    self.kv_o.frombytes(_ACQUIRE_BYTE * m)
        fin = st["fin"]
        for i, reason in fin:
            r = reqs.get(i)
            if r is not None:
                self._finish(i, r, str(reason or "unknown"), k, t3, k)
        g = st.get
        a, b, c = g("free"), g("free_sched"), g("cached_free")
        a, b, c = _NAN if a is None else a, _NAN if b is None else b, _NAN if c is None else c   # not recorded
        if t0 is not None and t1 is not None and t2 is not None and t3 is not None:
            self.s_all.extend((k, e0, t0, t3, t1 - t0, t2 - t1, t3 - t2, n, running_n, waiting_n, len(pre),
                               len(fin), a, b, c))
        else:
            self.s_all.extend((k, e0, _NAN if t0 is None else t0, _NAN if t3 is None else t3,
                               _NAN if t0 is None or t1 is None else t1 - t0,
                               _NAN if t1 is None or t2 is None else t2 - t1,
                               _NAN if t2 is None or t3 is None else t3 - t2, n, running_n, waiting_n, len(pre),
                               len(fin), a, b, c))

    def _admit(self, i: int, r: _Req, e: int, k: int, t0) -> None:
        fs = self.free_slots
        if fs:
            r.slot = min(fs)
            fs.remove(r.slot)
        else:
            r.slot, self.next_slot = self.next_slot, self.next_slot + 1
        r.running = True
        r.admitted_at = e
        self.running.add(i)
        for buf, v in zip(self.admits, (r.row, e, r.slot)):
            buf.append(v)
        self.ev.add(k, t0, r.row, RESUME if r.preemptions else ADMIT, f"slot {r.slot}")

    # -- the Trace so far ------------------------------------------------------------------------
    def trace(self, rec, keep: bool = False) -> Trace:
        """The Trace so far. keep: the worked-out columns are kept, so that the next call works
        out only what came since (a recording read as it grows); a builder that keeps them
        extends them on every call."""
        from .tables import Tables, build
        if keep and self.tables is None:
            self.tables = Tables()
        with no_gc():
            return build(self, rec, self.tables)
