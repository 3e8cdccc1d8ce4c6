"""The KV block map at any step of a long trace without a pass over its whole kv log.

The kv log (Trace.kv: step, block, request, op) in step order is cut every CHECKPOINT_ROWS rows;
at each cut the state is kept: the net holds of every (block, request) with a nonzero count and
each block's last cached/evicted flag. The map at a step is the last cut before it plus the few
rows since, so a call costs a checkpoint's rows, not the log's (33M rows at a million requests).
Checkpoints are made as far as a call needs, once. The answer is the one a pass over the whole
log gives (block_map_scan, kept for logs not in step order).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

CHECKPOINT_ROWS = 1 << 16
_NO_FLAG, _CACHED, _EVICTED = 0, 1, 2


def codes_of(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(integer codes, names) of a text column, names sorted, code -1 where unknown: what
    pd.factorize(values, sort=True) gives, read straight from a compact column's codes."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = col.cat.categories
        if cats.is_monotonic_increasing:
            return col.array.codes, cats.to_numpy(dtype=object)   # the codes themselves (read-only), no copy
    codes, names = pd.factorize(col.to_numpy(), sort=True)
    return codes, np.asarray(names, dtype=object)


def key_like(a: np.ndarray, v):
    """`v` as a search key of `a`'s integer dtype, clipped to its range (a float rounded down:
    for side="right" only): np.searchsorted with a wider key converts the whole array first (a
    copy of a long column per call)."""
    if a.dtype.kind not in "iu":
        return v
    info = np.iinfo(a.dtype)
    if isinstance(v, float):
        v = np.floor(v)   # for side="right": the rows up to v are those up to floor(v)
    return a.dtype.type(min(max(int(v), info.min), info.max))


def _op_is(col: pd.Series, name: str) -> np.ndarray:
    return (col == name).to_numpy(dtype=bool)


class KvIndex:
    """A kv log in step order as arrays, with its checkpoints."""

    def __init__(self, step, block, req, names, sign, flag):
        self.step, self.block, self.req, self.names = step, block, req, names
        self.sign, self.flag = sign, flag
        self.width = max(len(names), 1)   # a (block, request) pair is block * width + request code
        nb = int(block.max()) + 1 if len(block) else 1
        self.nb = max(nb, 1)
        # checkpoint j: the state after the first j * CHECKPOINT_ROWS rows (keys, nets, flags)
        self.points = [(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                        np.zeros(self.nb, dtype=np.int8))]

    @classmethod
    def of(cls, kv: pd.DataFrame) -> "KvIndex | None":
        """The index of a kv table, or None when its rows are not in step order (or its blocks
        are not plain non-negative numbers): the whole-log pass answers those."""
        step = kv["step"].to_numpy()
        if step.dtype.kind not in "iu" or (len(step) > 1 and not np.all(step[1:] >= step[:-1])):
            return None
        block = kv["block"].to_numpy()
        if block.dtype.kind not in "iu" or (len(block) and block.min() < 0):
            return None
        req, names = codes_of(kv["request"])
        op = kv["op"]
        acq, rel = _op_is(op, "acquire"), _op_is(op, "release")
        sign = acq.astype(np.int8) - rel.astype(np.int8)
        sign[req < 0] = 0   # an unknown holder is no holder (a groupby drops it)
        flag = np.where(_op_is(op, "cached"), _CACHED, np.where(_op_is(op, "evicted"), _EVICTED, _NO_FLAG))
        return cls(step, block, req, names, sign, flag.astype(np.int8))

    def _advance(self, state, lo: int, hi: int):
        """The state after rows [lo, hi), from the state after rows [0, lo)."""
        keys, nets, flags = state
        own = np.flatnonzero(self.sign[lo:hi]) + lo
        if len(own):
            k = np.concatenate([keys, self.block[own].astype(np.int64) * self.width + self.req[own]])
            v = np.concatenate([nets, self.sign[own].astype(np.int64)])
            keys, inv = np.unique(k, return_inverse=True)
            nets = np.bincount(inv, weights=v, minlength=len(keys)).astype(np.int64)
            nz = nets != 0   # a net of 0 is no hold; a negative one (a log cut mid-run) is kept
            keys, nets = keys[nz], nets[nz]
        fl = np.flatnonzero(self.flag[lo:hi]) + lo
        if len(fl):
            flags = flags.copy()
            # the last flag of each block wins: reversed, np.unique's first index is the last row
            fb, ff = self.block[fl][::-1], self.flag[fl][::-1]
            ub, first = np.unique(fb, return_index=True)
            flags[ub] = ff[first]
        return keys, nets, flags

    def state(self, step: int):
        """(keys, nets, flags) at the end of `step`: from the checkpoint before it, then its rows."""
        end = int(np.searchsorted(self.step, key_like(self.step, step), side="right"))
        j = end // CHECKPOINT_ROWS
        while len(self.points) <= j:
            i = len(self.points)
            self.points.append(self._advance(self.points[-1], (i - 1) * CHECKPOINT_ROWS, i * CHECKPOINT_ROWS))
        return self._advance(self.points[j], j * CHECKPOINT_ROWS, end)

    def held_and_cached(self, step: int):
        """At the end of `step`: (block, request name) of every unit held, a pair repeated as
        often as it is held, by block then request; and the blocks whose last flag is cached."""
        keys, nets, flags = self.state(step)
        held = nets > 0
        reps = nets[held]
        names = np.asarray(self.names, dtype=object)
        return (np.repeat(keys[held] // self.width, reps), np.repeat(names[keys[held] % self.width], reps),
                np.flatnonzero(flags == _CACHED))

    def block_map(self, step: int, n: int):
        keys, nets, flags = self.state(step)
        held = keys[nets > 0]   # sorted: by block, then by request (codes in the names' sorted order)
        holders: list[list[str]] = [[] for _ in range(n)]
        names = self.names
        for b, r in zip((held // self.width).tolist(), (held % self.width).tolist()):
            holders[b].append(str(names[r]))
        cached = np.zeros(n, dtype=bool)
        m = min(n, len(flags))
        cached[:m] = flags[:m] == _CACHED
        count = np.fromiter((len(h) for h in holders), dtype=np.int64, count=n)
        return count, cached, holders


def block_map_scan(kv: pd.DataFrame, step: int, n: int):
    """The block map by a pass over the whole kv log (any row order)."""
    holders: list[list[str]] = [[] for _ in range(n)]
    cached = np.zeros(n, dtype=bool)
    upto = kv[kv["step"].to_numpy() <= step]
    op = np.asarray(upto["op"].to_numpy(), dtype=object)
    own = upto[(op == "acquire") | (op == "release")]
    sign = np.where(np.asarray(own["op"].to_numpy(), dtype=object) == "acquire", 1, -1)
    net = pd.DataFrame({"block": own["block"].to_numpy(), "request": np.asarray(own["request"].to_numpy(), dtype=object),
                        "s": sign})
    net = net.groupby(["block", "request"], sort=True)["s"].sum()
    for (b, r), s in net.items():
        if s > 0:
            holders[int(b)].append(str(r))
    flags = upto[(op == "cached") | (op == "evicted")]
    if len(flags):
        last = flags.groupby("block", sort=False)["op"].last()
        cached[last.index.to_numpy(dtype=np.int64)] = np.asarray(last.to_numpy(), dtype=object) == "cached"
    count = np.fromiter((len(h) for h in holders), dtype=np.int64, count=n)
    return count, cached, holders
