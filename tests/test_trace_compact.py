"""The compact Trace (sim.trace.SCHEMA): text columns categorical, integer columns int32 where
the values fit, the KV log in typed buffers, the block map from checkpoints. What a trace says
must not change: the metrics, the block map and the file are those of the same tables held as
text objects and int64 (the layout before), and files written before still load.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sim import kvindex, metrics, scenarios
from sim.kvindex import block_map_scan
from sim.metrics import per_request, summary, tenant_service, token_gaps
from sim.simulate import simulate
from sim.trace import SCHEMA, TABLES, Trace, categorical, plain_table, table_from_columns
from sim.workload import Request, Workload

FIXTURES = Path(__file__).parent / "fixtures" / "trace_v1"   # saved by the code before the compact columns


@pytest.fixture(scope="module")
def runs() -> dict[str, Trace]:
    return {k: simulate(scenarios.workload(k)) for k in ("lesson_abc", "prefix_sharing", "tenant_flood", "random_500")}


def plain(tr: Trace) -> Trace:
    """The same trace with every table as before: text as object, int32 as int64, Int32 as Int64."""
    return Trace(meta=dict(tr.meta), **{name: plain_table(getattr(tr, name)) for name in TABLES})


def same(a, b) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


def test_text_columns_are_categorical_and_numbers_narrow(runs):
    tr = runs["tenant_flood"]
    for name in TABLES:
        df = getattr(tr, name)
        for col, kind in SCHEMA[name].items():
            dt = df[col].dtype
            if kind == "cat":
                assert isinstance(dt, pd.CategoricalDtype), (name, col, dt)
                cats = dt.categories
                assert cats.is_monotonic_increasing and cats.dtype == object   # sorted: groupbys order as over text
                assert set(cats) == set(df[col].astype(object))                # no unused category
            elif kind in ("int32", "Int32"):
                assert str(dt) == kind, (name, col, dt)
    assert len(tr.counters) and len(tr.kv) and len(tr.events)


def test_metrics_are_those_of_the_plain_tables(runs):
    for key, tr in runs.items():
        old = plain(tr)
        a, b = summary(tr), summary(old)
        assert a.keys() == b.keys()
        assert all(same(a[k], b[k]) for k in a), key
        pd.testing.assert_frame_equal(per_request(tr), per_request(old))
        pd.testing.assert_frame_equal(token_gaps(tr), token_gaps(old))
        pd.testing.assert_frame_equal(tenant_service(tr), tenant_service(old))


def test_chunked_metric_passes_give_the_one_pass_sums(runs, monkeypatch):
    tr = runs["tenant_flood"]
    whole = (token_gaps(tr), tenant_service(tr), summary(tr))
    monkeypatch.setattr(metrics, "GAP_CHUNK_ROWS", 97)       # many blocks of request codes
    monkeypatch.setattr(metrics, "SERVICE_CHUNK_ROWS", 50)   # many ranges of whole steps
    parts = (token_gaps(tr), tenant_service(tr), summary(tr))
    pd.testing.assert_frame_equal(parts[0], whole[0])
    pd.testing.assert_frame_equal(parts[1], whole[1])
    assert all(same(parts[2][k], whole[2][k]) for k in whole[2])
    assert len(metrics._code_blocks(tr.batch["request"].array.codes, tr.batch["sampled"].to_numpy(), 97)) > 5


@pytest.mark.parametrize("key", ["prefix_sharing", "random_500"])
def test_block_map_from_checkpoints_is_the_whole_log_pass(runs, monkeypatch, key):
    monkeypatch.setattr(kvindex, "CHECKPOINT_ROWS", 64)   # a checkpoint every 64 changes
    tr = Trace(**{n: getattr(runs[key], n) for n in TABLES}, meta=runs[key].meta)   # a fresh index
    n = tr.num_blocks
    steps = range(0, tr.num_steps + 2) if key == "prefix_sharing" else range(0, tr.num_steps + 2, 7)
    cached_seen = held_seen = False
    for s in steps:
        got, want = tr.block_map(s), block_map_scan(tr.kv, s, n)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2], s
        cached_seen |= bool(got[1].any())
        held_seen |= bool(got[0].any())
    assert held_seen and (cached_seen or key != "prefix_sharing")
    assert len(tr._memo["kv"][-1].points) > 3   # the checkpoints were used


def test_block_map_of_a_log_out_of_step_order_takes_the_whole_pass(runs):
    tr = runs["prefix_sharing"]
    kv = tr.kv.iloc[::-1].reset_index(drop=True)
    shuffled = Trace(requests=tr.requests, steps=tr.steps, batch=tr.batch, events=tr.events, kv=kv, meta=tr.meta)
    for s in (3, 10, 20, tr.num_steps):
        got, want = shuffled.block_map(s), block_map_scan(kv, s, tr.num_blocks)
        assert got[2] == want[2] and np.array_equal(got[1], want[1])
    # the plain (object) kv log gives the same map as the categorical one
    p = plain(tr)
    assert all(p.block_map(s)[2] == tr.block_map(s)[2] for s in (3, 10, 20))


def test_batch_at_is_the_rows_of_that_step(runs):
    tr = runs["random_500"]
    b = tr.batch
    for s in (0, 1, 57, tr.num_steps, tr.num_steps + 5, 3.0):
        pd.testing.assert_frame_equal(tr.batch_at(s), b[b["step"].to_numpy() == s])
    assert tr.batch_at(2.5).empty
    rev = Trace(requests=tr.requests, steps=tr.steps, batch=b.iloc[::-1], events=tr.events, kv=tr.kv, meta=tr.meta)
    pd.testing.assert_frame_equal(rev.batch_at(57), b.iloc[::-1][b.iloc[::-1]["step"].to_numpy() == 57])


def test_file_round_trip_is_byte_identical_and_compact(runs):
    for tr in runs.values():
        data = tr.to_bytes()
        back = Trace.from_bytes(data)
        assert back.to_bytes() == data
        assert isinstance(back.batch["request"].dtype, pd.CategoricalDtype) and str(back.kv["block"].dtype) == "int32"
        pd.testing.assert_frame_equal(plain_table(back.batch), plain_table(tr.batch))
    wl = scenarios.workload("random_500")
    assert simulate(wl).to_bytes() == simulate(wl).to_bytes()   # deterministic


@pytest.mark.parametrize("key", ["lesson_abc", "prefix_sharing", "two_tenants"])
def test_a_file_written_before_loads_compact_with_the_same_bytes_and_metrics(key):
    data = (FIXTURES / f"{key}.trace").read_bytes()
    old = Trace.from_bytes(data)
    assert isinstance(old.requests["request"].dtype, pd.CategoricalDtype) and str(old.steps["step"].dtype) == "int32"
    assert old.to_bytes() == data   # the file layout is the one it was written in
    new = simulate(scenarios.workload(key))
    assert new.to_bytes() == data   # and this code writes the same file for the same run
    a, b = summary(old), summary(new)
    assert all(same(a[k], b[k]) for k in a)


def test_table_from_columns_takes_what_the_sources_pass():
    cols = {"step": [1, 2, 2], "request": ["b", None, "a"], "kind": np.array(["decode", "prefill", "decode"], dtype=object),
            "tokens": np.array([1, 5, 1], dtype=np.int64), "slot": [0, None, 1], "computed_before": None,
            "sampled": [True, False, True]}
    t = table_from_columns("batch", cols)
    assert t["request"].tolist() == ["b", "", "a"] and list(t["request"].cat.categories) == ["", "a", "b"]
    assert t["slot"].tolist() == [0, pd.NA, 1] and str(t["slot"].dtype) == "Int32"
    assert t["computed_before"].isna().all() and str(t["tokens"].dtype) == "int32"
    # a Categorical with its categories in any order, or unused ones, comes out sorted and trimmed
    c = pd.Categorical(["z", "y", "z"], categories=["z", "q", "y"])
    t2 = table_from_columns("batch", {**cols, "request": c})
    assert t2["request"].tolist() == ["z", "y", "z"] and list(t2["request"].cat.categories) == ["y", "z"]
    # a value past int32 keeps int64, unchanged
    big = table_from_columns("kv", {"step": [1, 2**40], "block": [3, 4], "request": ["a", "b"], "op": ["acquire"] * 2})
    assert str(big["step"].dtype) == "int64" and big["step"].tolist() == [1, 2**40]
    assert str(big["block"].dtype) == "int32"
    e = table_from_columns("events", {})
    assert len(e) == 0 and isinstance(e["kind"].dtype, pd.CategoricalDtype)


def test_categorical_from_codes_sorts_and_marks_unknown():
    c = categorical(np.array([2, 0, -1, 2]), ["b", "unused", "a"])
    assert c.tolist() == ["a", "b", "", "a"] and list(c.categories) == ["", "a", "b"]


def test_the_kv_log_is_typed_buffers_not_lists():
    wl = Workload([Request(f"r{i}", 40, 8, arrival_step=i) for i in range(6)],
                  config={"num_gpu_blocks": 12, "block_size": 16, "max_num_seqs": 4})
    tr = simulate(wl)
    from sim.kvpool import BlockPool
    pool = BlockPool(8, 16)
    pool.step = 3
    got = pool.allocate(2, "x")
    assert pool.kv_step.typecode == "i" and pool.log_step == [3, 3] and pool.log_req == ["x", "x"]
    assert pool.log_rows() == [(3, got[0], "x", 1), (3, got[1], "x", 1)]
    step, block, req, op, names = pool.log_columns(take=True)
    assert step.dtype == np.int32 and op.dtype == np.int8 and names == ["x"] and pool.log_len == 0
    assert str(tr.kv["step"].dtype) == "int32" and (tr.kv["op"] == "acquire").sum() == (tr.kv["op"] == "release").sum()


def test_recording_in_chunks_gives_the_same_trace_and_columns(monkeypatch):
    import sys
    sim_mod = sys.modules["sim.simulate"]
    wl = scenarios.workload("prefix_sharing")   # prefix caching: cached_free_blocks known
    whole, cols = simulate(wl).to_bytes(), simulate(wl, columns=True)
    monkeypatch.setattr(sim_mod, "STEP_CHUNK_ROWS", 3)
    monkeypatch.setattr(sim_mod, "BATCH_CHUNK_ROWS", 5)
    assert simulate(wl).to_bytes() == whole
    chunked = simulate(wl, columns=True)
    assert chunked.steps == cols.steps and chunked.requests == cols.requests
    assert all(np.array_equal(chunked.batch[k], cols.batch[k]) for k in cols.batch)
    assert cols.steps["cached_free_blocks"][0] is not None and isinstance(cols.batch["request"][0], str)
    plain_wl = scenarios.workload("lesson_abc")   # no prefix caching: cached_free_blocks unknown (None)
    assert simulate(plain_wl, columns=True).steps["cached_free_blocks"][0] is None
