"""sim/window.py: a window of a Trace keeps the KV state, the tables and the requests right; and
ui/window.py's pure parts (the window setting's text)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim import scenarios
from sim.cost import cost_from_preset
from sim.export import chrome_trace
from sim.fleet import FleetSettings, simulate_fleet
from sim.fleet.scenarios import chat
from sim.simulate import simulate
from sim.trace import Trace
from sim.window import clamp, describe, kv_base, step_range, window, window_of_time
from ui.window import DEFAULT_SPAN, encode_window, parse_window, resolve


def _busy() -> Trace:
    """500 random requests with prefix caching on: preemptions, and cached-free blocks at most steps."""
    tr = simulate(scenarios.workload("random_500"), {"enable_prefix_caching": True})
    assert tr.requests["preemptions"].sum() > 0 and (tr.kv["op"] == "cached").any()
    return tr


@pytest.fixture(scope="module")
def busy() -> Trace:
    return _busy()


def _same_map(a: Trace, b: Trace, step: int) -> bool:
    c1, k1, h1 = a.block_map(step)
    c2, k2, h2 = b.block_map(step)
    return (np.array_equal(c1, c2) and np.array_equal(k1, k2)
            and [sorted(map(str, h)) for h in h1] == [sorted(map(str, h)) for h in h2])


def test_the_block_map_of_a_window_is_the_full_traces_at_every_step_in_it(busy):
    lo, hi = step_range(busy)
    first, last = lo + (hi - lo) // 3, lo + 2 * (hi - lo) // 3
    base = kv_base(busy.kv, first - 1)
    # the window starts mid-run: blocks held and cached-free blocks both carried over
    assert (base["op"] == "acquire").sum() > 0 and (base["op"] == "cached").sum() > 0
    w = window(busy, first, last)
    bad = [s for s in range(first, last + 1) if not _same_map(busy, w, s)]
    assert not bad, bad[:5]
    assert len(w.kv) < len(busy.kv)   # the log before the window is not carried, only its state


def _rows(base: pd.DataFrame) -> list:
    return sorted(zip(base["step"].astype(int), base["block"].astype(int), base["request"].astype(str),
                      base["op"].astype(str)))


def test_the_state_at_a_windows_start_from_checkpoints_is_the_whole_logs(busy, monkeypatch):
    import sim.kvindex
    from sim.window import _kv_base_indexed
    monkeypatch.setattr(sim.kvindex, "CHECKPOINT_ROWS", 97)   # many checkpoints, each one crossed
    lo, hi = step_range(busy)
    fresh = Trace(**{n: getattr(busy, n) for n in ("requests", "steps", "batch", "events", "kv", "counters")},
                  meta=busy.meta)   # its own index, made with the small checkpoints
    for before in [lo - 1, lo, *range(lo + 1, hi, max(1, (hi - lo) // 37)), hi]:
        assert _rows(_kv_base_indexed(fresh, before)) == _rows(kv_base(busy.kv, before)), before


def test_prefix_sharing_with_a_preemption_keeps_its_map_in_every_window():
    tr = simulate(scenarios.workload("prefix_sharing"))
    assert tr.requests["preemptions"].sum() > 0 and tr.meta["config"]["enable_prefix_caching"]
    lo, hi = step_range(tr)
    for first in range(lo, hi + 1, 3):
        last = min(hi, first + 5)
        w = window(tr, first, last)
        assert all(_same_map(tr, w, s) for s in range(first, last + 1)), (first, last)


def test_the_tables_are_cut_to_the_window(busy):
    w = window(busy, 300, 420)
    for name in ("steps", "batch", "events", "counters"):
        s = getattr(w, name)["step"].to_numpy()
        assert len(s) == 0 or (s.min() >= 300 and s.max() <= 420), name
    assert w.num_steps == 121 and w.steps["step"].tolist() == list(range(300, 421))
    full = busy.batch[(busy.batch["step"] >= 300).to_numpy() & (busy.batch["step"] <= 420).to_numpy()]
    assert len(w.batch) == len(full) and int(w.batch["tokens"].sum()) == int(full["tokens"].sum())
    # every request seen in the window is in its requests table; none that finished before it or
    # arrived after it
    ids = set(w.requests["request"].astype(str))
    assert set(w.batch["request"].astype(str)) <= ids and set(w.events["request"].astype(str)) <= ids
    r = w.requests
    assert (r["arrival_step"].astype(float) <= 420).all() and (r["finish_step"].astype(float) >= 300).all()
    assert len(r) < len(busy.requests)
    assert w.meta["window"] == {"first": 300, "last": 420, "of_first": 1, "of_last": busy.steps["step"].max(),
                                "of_steps": busy.num_steps}
    assert describe(w) == f"steps 300 to 420 of {busy.num_steps:,}" and describe(busy) == ""


def test_a_window_is_clamped_and_the_whole_run_is_the_trace_itself(busy):
    lo, hi = step_range(busy)
    assert window(busy, lo - 50, hi + 50) is busy
    assert clamp(busy, hi + 10, -5) == (lo, hi)
    w = window(busy, hi - 10, hi + 1000)
    assert w.steps["step"].tolist() == list(range(hi - 10, hi + 1))


def test_the_same_window_gives_the_same_bytes(busy):
    assert window(busy, 200, 260).to_bytes() == window(busy, 200, 260).to_bytes()


def test_a_window_exports_to_chrome_with_only_its_steps(busy):
    w = window(busy, 400, 450)
    doc = chrome_trace(w)
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert slices and len(slices) == len(w.batch[w.batch["slot"].notna().to_numpy()])


def test_a_trace_of_plain_columns_windows_the_same(busy):
    """Object text and int64 columns (a Trace as the committed code held it) give the same window."""
    def plain(df: pd.DataFrame) -> pd.DataFrame:
        out = {}
        for c in df.columns:
            d = df[c]
            if isinstance(d.dtype, pd.CategoricalDtype):
                out[c] = pd.Series(d.astype(str).to_numpy(dtype=object), dtype=object)
            elif str(d.dtype) == "int32":
                out[c] = d.astype("int64")
            elif str(d.dtype) == "Int32":
                out[c] = d.astype("Int64")
            else:
                out[c] = d
        return pd.DataFrame(out)
    old = Trace(**{n: plain(getattr(busy, n)) for n in ("requests", "steps", "batch", "events", "kv", "counters")},
                meta=busy.meta)
    assert old.kv["request"].dtype == object
    a, b = window(busy, 500, 600), window(old, 500, 600)
    assert all(_same_map(a, b, s) for s in range(500, 601, 7))
    assert len(a.batch) == len(b.batch) and len(a.requests) == len(b.requests) and len(a.kv) == len(b.kv)


def test_a_window_of_a_fleet_replica_on_its_ms_clock():
    fleet = simulate_fleet(chat(200), FleetSettings(replicas=2, router="round_robin"),
                           cost=cost_from_preset("a100-8B-fp16"))
    rep = fleet.replicas[1]
    start = rep.steps["start"].to_numpy(dtype=float)
    t0, t1 = float(np.quantile(start, 0.4)), float(np.quantile(start, 0.6))
    w = window_of_time(rep, t0, t1)
    ws = w.steps["start"].to_numpy(dtype=float)
    assert len(ws) and ws.min() >= t0 and ws.max() <= t1
    assert len(ws) == int(((start >= t0) & (start <= t1)).sum())
    steps = w.steps["step"].to_numpy()
    assert all(_same_map(rep, w, int(s)) for s in steps[:: max(1, len(steps) // 40)])


@pytest.mark.parametrize("text,want", [(None, None), ("", None), ("all", "all"), ("last5000", ("last", 5000)),
                                       ("12000-17000", (12000, 17000)), (" 17000 - 12000 ", (12000, 17000))])
def test_the_window_setting_parses(text, want):
    assert parse_window(text) == want
    if want is not None:
        assert parse_window(encode_window(want)) == want


@pytest.mark.parametrize("text", ["12000", "a-b", "-5-7", "last0", "1-2-3", "x" * 500])
def test_a_bad_window_setting_is_one_plain_sentence(text):
    with pytest.raises(ValueError) as e:
        parse_window(text)
    msg = str(e.value)
    assert "FIRST-LAST" in msg and len(msg) <= 200 and "\n" not in msg


def test_resolve_puts_the_default_window_around_a_step_inside_the_run():
    assert resolve(None, 1, 360_000, around=100_000) == (100_000 - DEFAULT_SPAN // 2,
                                                         100_000 - DEFAULT_SPAN // 2 + DEFAULT_SPAN - 1)
    assert resolve(None, 1, 360_000, around=5) == (1, DEFAULT_SPAN)
    assert resolve(None, 1, 360_000, around=359_999) == (360_000 - DEFAULT_SPAN + 1, 360_000)
    assert resolve(None, 1, 100) == (1, 100)
    assert resolve(("last", 10), 1, 360_000) == (359_991, 360_000)
    assert resolve("all", 3, 9) == (3, 9)
    assert resolve((500, 400_000), 1, 360_000) == (500, 360_000)
