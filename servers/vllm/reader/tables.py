"""The Trace's tables from a TraceBuilder's buffers (replay.py), with numpy: what each batch
entry is and the requests' firsts, worked out over all entries at once.

- an entry's slot is its request's at its last admission; its recompute horizon the one set at
  the request's last preemption before it (both: the latest record of that request at or
  before the entry, found by one searchsorted over (request, entry) keys);
- its kind is the simulator's (sim.scheduler._entry): "recompute" below that horizon,
  "decode" once the prompt is done and the request has sampled before, else "prefill";
- a finish event says the tokens the request had sampled by then.
"""
from __future__ import annotations

from array import array

import numpy as np
import pandas as pd

from sim import versions
from sim.trace import Trace, kv_table, table_from_columns

from .lines import CONFIG_KEYS
from .replay import DECODE, EVENT_KINDS, KINDS, PHASES, PREFILL, RECOMPUTE, SOURCE, STEP_COLUMNS


try:   # text columns straight from codes (the compact Trace's Categoricals), without hashing each value
    from sim.trace import categorical as _categorical
except ImportError:   # pragma: no cover - a Trace of plain text columns
    _categorical = None


def _text(codes: np.ndarray, names: np.ndarray):
    """A text column: names[codes], as the Trace holds text."""
    return _categorical(codes, names) if _categorical is not None else names[codes]


def _ids(codes: np.ndarray, names: np.ndarray, order: np.ndarray | None):
    """_text of request rows, with the ids' sort order worked out once a Trace (order: argsort
    of the ids, all different; None: as _text): the same Categorical, without sorting the ids
    again for each table."""
    codes = np.asarray(codes)
    if order is None or _categorical is None or (len(codes) and codes.min() < 0):
        return _text(codes, names)
    used = (np.bincount(codes, minlength=len(names)) > 0) if len(codes) else np.zeros(len(names), dtype=bool)
    used = used[order]
    cats = names[order][used]
    rank = np.full(len(names), -1, dtype=np.int8 if len(cats) < 127 else np.int32)
    rank[order[used]] = np.arange(len(cats), dtype=rank.dtype)
    dtype = pd.CategoricalDtype(pd.Index(np.asarray(cats, dtype=object), dtype=object))
    return pd.Categorical.from_codes(rank[codes] if len(codes) else np.zeros(0, dtype=np.int8), dtype=dtype)


def _np(buf: array) -> np.ndarray:
    """A copy of a buffer as numpy (a view would stop the buffer from growing)."""
    return np.array(buf, dtype=np.dtype(buf.typecode)) if len(buf) else np.zeros(0, dtype=np.dtype(buf.typecode))


def _latest(records, rows: np.ndarray, query: np.ndarray, width: int, default) -> np.ndarray:
    """Per (row, entry), query = row * width + entry: the value of the last record (row, from
    entry, value) of that row at or before that entry, in record order among equals; `default`
    where there is none. (In place where it can: every temporary here is as long as the entries.)"""
    r_row, r_at, r_val = (_np(b) for b in records)
    if not len(r_row):
        return np.full(len(rows), default, dtype=np.int64)
    keys = r_row * width + r_at
    order = np.argsort(keys, kind="stable")
    keys, r_row, r_val = keys[order], r_row[order], r_val[order]
    pos = np.searchsorted(keys, query, side="right")
    pos -= 1
    ok = pos >= 0
    np.maximum(pos, 0, out=pos)
    ok &= r_row[pos] == rows
    out = r_val[pos]
    out[~ok] = default
    return out


def _group_starts(sorted_rows: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts in a sorted array."""
    if not len(sorted_rows):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_rows[1:] != sorted_rows[:-1]])


_MISSING = " step entries name requests the recording never added (it continues an earlier file?): left out"


def build(b, rec, tables: "Tables | None" = None) -> Trace:
    """The Trace of what b holds. `tables`: the Tables of an earlier call on the same builder, to
    extend with what came since (a recording read as it grows); None: made here and let go."""
    if b.missing:   # said once, with the count so far (a Trace taken again as lines come says it anew)
        rec.warnings[:] = [w for w in rec.warnings if not w.endswith(_MISSING)]
        rec.warn(f"{b.missing}{_MISSING}")
    t = tables if tables is not None else Tables()
    t.extend(b)
    return t.trace(b, rec)


class _Grow:
    """A numpy column grown at its end (capacity doubled): appends copy only what is new."""

    __slots__ = ("a", "n")

    def __init__(self, dtype):
        self.a, self.n = np.zeros(0, dtype=dtype), 0

    def extend(self, v: np.ndarray) -> None:
        m = self.n + len(v)
        if m > len(self.a):
            bigger = np.empty(max(m, 2 * len(self.a), 1024), dtype=self.a.dtype)
            bigger[:self.n] = self.a[:self.n]
            self.a = bigger
        self.a[self.n:m] = v
        self.n = m

    def view(self) -> np.ndarray:
        return self.a[:self.n]

    def fill(self, n: int, value) -> None:
        """Grow to n values, the new ones `value`."""
        if n > self.n:
            self.extend(np.full(n - self.n, value, dtype=self.a.dtype))


class Tables:
    """The Trace's columns worked out from a TraceBuilder's buffers a stretch of steps at a time:
    what each new batch entry is (slot, kind, tokens redone), the new steps' token sums and each
    request's firsts, with each request's state at the stretch's start (its slot and recompute
    horizon, tokens sampled) carried over. An entry depends only on what came at or before it,
    so its row never changes once made; the tables are then put together from the kept columns
    (a copy of numpy arrays, not a pass over the entries)."""

    def __init__(self):
        self.n_e = self.n_s = self.n_rows = 0          # entries, steps, requests taken
        self.i_admit = self.i_pre = self.i_drop = self.i_fin = self.i_arrive = 0   # buffer records taken
        self.adds: list = []                            # each row's add line, as taken (a row re-added: start again)
        # per entry
        self.e_step, self.e_row, self.e_slot = _Grow(np.int64), _Grow(np.int64), _Grow(np.int64)
        self.e_kind, self.e_tokens, self.e_before = _Grow(np.int8), _Grow(np.int64), _Grow(np.int64)
        self.e_sampled = _Grow(np.bool_)
        # per step
        self.s_tok = {c: _Grow(np.int64) for c in ("prefill_tokens", "decode_tokens", "recompute_tokens")}
        self.s_arrived = _Grow(np.int64)
        self.last_step = None
        # per request: its state at the end of the entries taken, and its firsts
        self.r_slot, self.r_horizon, self.r_out = _Grow(np.int64), _Grow(np.int64), _Grow(np.int64)
        self.r_redo = _Grow(np.int64)
        self.r_fs_step, self.r_fs_time, self.r_cached = _Grow(np.float64), _Grow(np.float64), _Grow(np.float64)
        self.r_ft_step, self.r_ft_time = _Grow(np.float64), _Grow(np.float64)
        self.r_prompt = _Grow(np.int64)
        self.ids = np.empty(0, dtype=object)
        self.r_cols: dict[str, list] = {k: [] for k in ("priority", "max_tokens", "arrival_step", "arrival_time",
                                                         "received_time")}
        self.detail: list = []                          # the step events' details, finishes' said
        self.per = {k: _Grow(np.float64) for k in STEP_COLUMNS}

    # ------------------------------------------------------------------ what came since
    def extend(self, b) -> None:
        reqs = b.rows
        if any(reqs[j].add is not a for j, a in enumerate(self.adds)):   # a row's request replaced: anew
            self.__init__()
        self._rows(reqs)
        n_steps = len(b.s_all) // len(STEP_COLUMNS)
        s0, e0, e1 = self.n_s, self.n_e, b.e_count
        if n_steps == s0 and e1 == e0 and self.i_fin == len(b.fin_ev):
            self._arrived(b, n_steps)
            return
        width = len(STEP_COLUMNS)
        seg = _np(b.s_all[s0 * width:n_steps * width]).reshape(n_steps - s0, width) if n_steps > s0 else \
            np.zeros((0, width))
        for j, c in enumerate(STEP_COLUMNS):
            self.per[c].extend(seg[:, j])
        first = seg[:, STEP_COLUMNS.index("first_entry")].astype(np.int64)
        per_step = np.diff(np.append(first, e1))
        sidx = np.repeat(np.arange(s0, n_steps), per_step)
        at = np.arange(e0, e1)
        flat = _np(b.e_flat[3 * e0:3 * e1]).reshape(e1 - e0, 3)
        sampled = _np(b.e_sampled[e0:e1]).astype(bool)
        drops = _np(b.e_drop[self.i_drop:])
        self.i_drop = len(b.e_drop)
        if len(drops):
            keep = np.ones(e1 - e0, dtype=bool)
            keep[drops - e0] = False
            flat, sampled, sidx, at = flat[keep], sampled[keep], sidx[keep], at[keep]
        row = self._row_of(b, flat[:, 0])
        tokens, before = flat[:, 1], flat[:, 2]
        width_e = e1 + 1
        query = row * width_e + at
        slot = self._latest(b.admits, "i_admit", self.r_slot, row, query, width_e, e1)
        horizon = self._latest(b.preempts, "i_pre", self.r_horizon, row, query, width_e, e1)
        del query
        # tokens the request sampled before each entry: what it had at the stretch's start, and a
        # running count over its entries here
        by_row = np.argsort(row, kind="stable")
        s_sorted = sampled[by_row].astype(np.int64)
        csum = np.cumsum(s_sorted)
        rows_sorted = row[by_row]
        starts = _group_starts(rows_sorted)
        start_of = np.repeat(csum[starts] - s_sorted[starts], np.diff(np.append(starts, len(row))))
        out_before = np.empty(len(row), dtype=np.int64)
        csum -= s_sorted
        csum -= start_of
        out_before[by_row] = csum
        del csum, start_of
        r_out = self.r_out.view()
        out_before += r_out[row]
        prompt_len = self.r_prompt.view()
        redo_mask = before < horizon
        decode = ~redo_mask & (before >= prompt_len[row]) & (out_before > 0)
        kind = np.where(redo_mask, RECOMPUTE, np.where(decode, DECODE, PREFILL)).astype(np.int8)
        redo = np.where(redo_mask, np.minimum(before + tokens, horizon) - before, 0)
        step_no = self.per["step"].view().astype(np.int64)
        t_start, t_end = self.per["start"].view(), self.per["end"].view()
        self.e_step.extend(step_no[sidx])
        self.e_row.extend(row)
        self.e_slot.extend(slot)
        self.e_kind.extend(kind)
        self.e_tokens.extend(tokens)
        self.e_before.extend(before)
        self.e_sampled.extend(sampled)
        # the new steps' tokens by kind
        n_new = n_steps - s0
        by_kind = np.bincount((sidx - s0) * 3 + kind, weights=tokens, minlength=3 * n_new).reshape(n_new, 3) \
            .astype(np.int64)
        for c, code in (("prefill_tokens", PREFILL), ("decode_tokens", DECODE), ("recompute_tokens", RECOMPUTE)):
            self.s_tok[c].extend(by_kind[:, code])
        # the requests' firsts: the first entry of each request here, and the first that sampled,
        # where it had none before
        fs_step, fs_time, cached = self.r_fs_step.view(), self.r_fs_time.view(), self.r_cached.view()
        u, f = rows_sorted[starts], by_row[starts]
        new = np.isnan(fs_step[u])
        u, f = u[new], f[new]
        fs_step[u], fs_time[u], cached[u] = step_no[sidx[f]], t_start[sidx[f]], before[f]
        got = by_row[sampled[by_row]]
        got_rows = row[got]
        at_got = _group_starts(got_rows)
        ft_step, ft_time = self.r_ft_step.view(), self.r_ft_time.view()
        u, f = got_rows[at_got], got[at_got]
        new = np.isnan(ft_step[u])
        u, f = u[new], f[new]
        ft_step[u], ft_time[u] = step_no[sidx[f]], t_end[sidx[f]]
        # the finishes' tokens (each said the tokens its request had sampled before it)
        keys = got_rows * width_e + at[got]
        self._finishes(b, keys, width_e, r_out)
        r_out += np.bincount(row[sampled], minlength=len(r_out))
        self.r_redo.view()[:] += np.bincount(row, weights=redo, minlength=self.n_rows).astype(np.int64)
        self.n_s, self.n_e = n_steps, e1
        self._arrived(b, n_steps)

    def _rows(self, reqs) -> None:
        """Requests added since: their columns' values that never change, and their state."""
        new = reqs[self.n_rows:]
        if not new:
            return
        n = len(reqs)
        self.adds += [r.add for r in new]
        ids = np.empty(len(new), dtype=object)
        ids[:] = [r.add["id"] for r in new]
        self.ids = np.concatenate([self.ids, ids])
        a = [r.add for r in new]
        c = self.r_cols
        c["priority"] += [int(x.get("priority") or 0) for x in a]
        c["max_tokens"] += [x["max_tokens"] for x in a]
        c["arrival_step"] += [max(int(x.get("before_step") or 1) - 1, 0) for x in a]
        c["arrival_time"] += [x.get("added") for x in a]
        c["received_time"] += [x.get("arrival") for x in a]
        self.r_prompt.extend(np.fromiter((x["prompt_len"] for x in a), dtype=np.int64, count=len(a)))
        for g, v in ((self.r_slot, -1), (self.r_horizon, 0), (self.r_out, 0), (self.r_redo, 0),
                     (self.r_fs_step, np.nan), (self.r_fs_time, np.nan), (self.r_cached, np.nan),
                     (self.r_ft_step, np.nan), (self.r_ft_time, np.nan)):
            g.fill(n, v)
        self.n_rows = n

    @staticmethod
    def _row_of(b, idx: np.ndarray) -> np.ndarray:
        """The row of each recorder index (every one added)."""
        keys = np.fromiter(b.reqs.keys(), dtype=np.int64, count=len(b.reqs))
        vals = np.fromiter((r.row for r in b.reqs.values()), dtype=np.int64, count=len(b.reqs))
        if not len(idx):
            return np.zeros(0, dtype=np.int64)
        order = np.argsort(keys)
        keys, vals = keys[order], vals[order]
        if keys[0] >= 0 and keys[-1] < 4 * len(keys) + (1 << 16):   # the recorder's 0, 1, 2, ...: a lookup table
            lut = np.zeros(int(keys[-1]) + 1, dtype=np.int64)
            lut[keys] = vals
            return lut[idx]
        return vals[np.searchsorted(keys, idx)]

    def _latest(self, records, pos: str, state: _Grow, rows, query, width, e1) -> np.ndarray:
        """Per entry: the value of the last record of its request at or before it (_latest), among
        the records that take effect from an entry here; else the request's value at the stretch's
        start. The requests' values are then the last of their records here."""
        i0 = getattr(self, pos)
        r_at_all = records[1]
        i1 = i0
        n = len(r_at_all)
        while i1 < n and r_at_all[i1] < e1:   # records take effect from an entry: those past the last wait
            i1 += 1
        setattr(self, pos, i1)
        rec = tuple(buf[i0:i1] for buf in records)
        cur = state.view()
        if not len(rows):
            out = np.zeros(0, dtype=np.int64)
        else:
            sentinel = np.iinfo(np.int64).min
            out = _latest(rec, rows, query, width, sentinel)
            miss = out == sentinel
            out[miss] = cur[rows[miss]]
        if len(rec[0]):   # each request's last record here (records come in the order they take effect)
            r_row, r_val = _np(rec[0])[::-1], _np(rec[2])[::-1]
            u, last = np.unique(r_row, return_index=True)
            cur[u] = r_val[last]
        return out

    def _finishes(self, b, keys: np.ndarray, width: int, r_out: np.ndarray) -> None:
        """The step events' details taken since, a finish's with the tokens its request sampled
        before it (what it had at the stretch's start, and its entries here before the finish)."""
        e = b.ev
        self.detail += e.detail[len(self.detail):]
        fins = b.fin_ev[self.i_fin:]
        self.i_fin = len(b.fin_ev)
        if not fins:
            return
        keys = np.sort(keys)
        pos, f_row, f_at, why = zip(*fins)
        f_row = np.asarray(f_row, dtype=np.int64)
        lo = f_row * width
        n_out = np.searchsorted(keys, lo + np.asarray(f_at, dtype=np.int64)) - np.searchsorted(keys, lo) + r_out[f_row]
        for p, w, n in zip(pos, why, n_out.tolist()):
            self.detail[p] = f"{w}, {n} tokens"

    def _arrived(self, b, n_steps: int) -> None:
        """Per step, the requests added before it; a request added before a step taken already
        (an add line after its step) has every step's count made again."""
        a_steps = b.arrive_ev.step
        late = self.last_step is not None and any(k <= self.last_step for k in a_steps[self.i_arrive:])
        self.i_arrive = len(a_steps)
        steps = self.per["step"].view()
        lo = 0 if late else self.s_arrived.n
        if late:
            self.s_arrived = _Grow(np.int64)
        self.s_arrived.extend(np.fromiter((b.arrived.get(int(k), 0) for k in steps[lo:n_steps]), dtype=np.int64,
                                          count=n_steps - lo))
        if n_steps:
            self.last_step = int(steps[n_steps - 1])

    # ------------------------------------------------------------------ the Trace
    def trace(self, b, rec) -> Trace:
        ids, n_rows = self.ids, self.n_rows
        order = np.argsort(ids, kind="stable") if n_rows else np.zeros(0, dtype=np.int64)
        if n_rows > 1 and (ids[order[1:]] == ids[order[:-1]]).any():
            order = None   # an id twice: categorical() decides
        row = self.e_row.view()
        slot = self.e_slot.view()
        batch = table_from_columns("batch", {
            "step": self.e_step.view().copy(), "request": _ids(row, ids, order),
            "slot": np.where(slot < 0, np.nan, slot) if (slot < 0).any() else slot.copy(),
            "kind": _text(self.e_kind.view().astype(np.int64), KINDS), "tokens": self.e_tokens.view().copy(),
            "computed_before": self.e_before.view().copy(), "sampled": self.e_sampled.view().copy()})
        per = {c: g.view() for c, g in self.per.items()}
        sums = {c: g.view().copy() for c, g in self.s_tok.items()}
        starts = per["start"].copy()
        cols = {"step": per["step"].astype(np.int64), "start": starts, "end": per["end"].copy(),
                "num_tokens": sums["prefill_tokens"] + sums["decode_tokens"] + sums["recompute_tokens"], **sums}
        for name in ("num_seqs", "running", "waiting", "preempted", "finished"):
            cols[name] = per[name].astype(np.int64)
        for name in ("free_blocks", "free_blocks_after_schedule", "cached_free_blocks"):
            cols[name] = per[name].copy()
        n_steps = len(starts)
        cols["arrived"] = self.s_arrived.view().copy()
        # a step that scheduled no token did no work (the recorder marks it "idle": nothing was
        # runnable): busy_steps, busy time and the per-step means leave it out, as a simulated run's
        cols.update(idle=cols["num_tokens"] == 0, swap_bytes=np.zeros(n_steps))
        for p in PHASES:
            cols[p] = per[p].copy()
        cols["period_ms"] = np.append(np.diff(starts), np.nan) if n_steps else np.zeros(0)
        steps = table_from_columns("steps", cols)
        reqs = b.rows
        fin = [r.finish or (None, None, "") for r in reqs]
        c = self.r_cols
        requests = table_from_columns("requests", {
            "request": ids.copy(), "tenant": ["default"] * n_rows, "priority": list(c["priority"]),
            "prompt_len": self.r_prompt.view().copy(), "max_tokens": list(c["max_tokens"]),
            "arrival_step": list(c["arrival_step"]), "arrival_time": list(c["arrival_time"]),
            "first_scheduled_step": self.r_fs_step.view().copy(), "first_scheduled_time": self.r_fs_time.view().copy(),
            "first_token_step": self.r_ft_step.view().copy(), "first_token_time": self.r_ft_time.view().copy(),
            "finish_step": [f[0] for f in fin], "finish_time": [f[1] for f in fin],
            "cached_tokens": self.r_cached.view().copy(), "output_tokens": self.r_out.view().copy(),
            "preemptions": [r.preemptions for r in reqs], "recomputed_tokens": self.r_redo.view().copy(),
            "rejected": [False] * n_rows, "finish_reason": [f[2] for f in fin], "slot": [r.slot for r in reqs],
            "received_time": np.array(c["received_time"], dtype=float)})
        events = self._events(b, ids, order)
        kv = kv_table(_np(b.kv_s), _np(b.kv_b), _ids(_np(b.kv_r), ids, order), _np(b.kv_o).astype(np.int64))
        return Trace(requests=requests, steps=steps, batch=batch, events=events, kv=kv,
                     counters=table_from_columns("counters", {"step": [], "tenant": [], "value": []}),
                     meta=_meta(rec, n_rows))

    def _events(self, b, ids, order):
        """The arrivals first, then the steps' events, each in the order they came; then stably by
        step (as the events were always ordered)."""
        a, e = b.arrive_ev, b.ev
        n_ev = len(e.step)
        step = np.concatenate([_np(a.step), _np(e.step)])
        by_step = np.argsort(step, kind="stable")
        text = np.empty(len(step), dtype=object)
        text[:] = a.detail + self.detail[:n_ev]
        return table_from_columns("events", {
            "step": step[by_step], "time": np.concatenate([_np(a.time), _np(e.time)])[by_step],
            "request": _ids(np.concatenate([_np(a.req), _np(e.req)])[by_step], ids, order),
            "kind": _text(np.concatenate([_np(a.kind), _np(e.kind)]).astype(np.int64)[by_step], EVENT_KINDS),
            "detail": text[by_step]})


def _keeps_null_block(version) -> bool:
    """Whether the recorded vLLM keeps block 0 back (0.8.2 and before hand it out; a version the
    simulator has no rules for is taken to, as every later one does)."""
    try:
        return versions.rules(str(version)).null_block
    except (ValueError, KeyError):
        return True


def _meta(rec, n_requests: int) -> dict:
    cfg = rec.config
    h = rec.header
    return {"source": SOURCE, "name": rec.name, "time_unit": "ms", "time_origin": "recorder start",
            "scheduler": "vllm", "vllm_version": h.get("vllm"), "scheduler_class": h.get("scheduler_class"),
            "started_unix": h.get("started_unix"), "async_scheduling": bool(cfg.get("async_scheduling")),
            "config": {k: cfg[k] for k in CONFIG_KEYS if k in cfg}, "num_blocks": cfg.get("num_gpu_blocks"),
            "block_size": cfg.get("block_size"), "prompts": h.get("prompts"), "ended": rec.ended,
            "block_ids": bool(h.get("block_ids")), "continues_earlier": rec.continues_earlier,
            "warnings": list(rec.warnings), "num_requests": n_requests, "phases": list(PHASES),
            **({} if _keeps_null_block(h.get("vllm")) else {"null_block": False})}
