"""What keeps long runs small gives the same answers: a Digest (simulate(..., digest=True)) the
full Trace's metrics, the recorder's batch chunks the same trace bytes, the keyed policies' heap
the order a sort per step would serve."""
from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest

from sim import scenarios
from sim.jsonout import dumps_strict
from sim.metrics import digest_of, summary
from sim.policies import KeyedQueue
from sim.simulate import oracle_jsonl, simulate
from sim.slo import SLO
from sim.workload import generate

SLO_T = SLO.parse({"ttft": 40, "tpot": 3, "e2e": 400})


def _same(a: dict, b: dict) -> list:
    bad = []
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float):
            if math.isnan(x) and math.isnan(y):
                continue
            if math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                continue
        elif x == y:
            continue
        bad.append((k, x, y))
    return bad


def _mixed(n=400, seed=7):
    return generate(n, seed=seed, arrival="poisson", rate=0.6, tenants={"a": 3, "b": 1, "c": 1},
                    prompt={"dist": "lognormal", "median": 60, "sigma": 1.0, "max": 400},
                    output={"dist": "lognormal", "median": 12, "sigma": 1.0, "max": 120},
                    config={"num_gpu_blocks": 160, "block_size": 16, "max_num_batched_tokens": 256,
                            "max_num_seqs": 24})


CASES = [(name, None) for name in scenarios.SCENARIOS] + [
    ("mixed", {}), ("mixed", {"scheduler": "static"}), ("mixed", {"policy": "vtc"}),
    ("mixed", {"policy": "sjf", "aging": 0.3}), ("mixed", {"preemption_mode": "swap"}),
    ("mixed", {"policy": "priority"}), ("mixed", {"enable_prefix_caching": True}),
    ("mixed", {"max_queued_requests": 20}),
]


@pytest.mark.parametrize("name,config", CASES, ids=[f"{n}-{json.dumps(c)}" for n, c in CASES])
def test_digest_metrics_equal_the_traces(name, config):
    wl = _mixed() if name == "mixed" else scenarios.workload(name)
    trace = simulate(wl, config)
    dg = simulate(wl, config, digest=True)
    full = summary(trace, slo=SLO_T)
    assert _same(full, summary(dg, slo=SLO_T)) == []
    assert _same(full, summary(digest_of(trace), slo=SLO_T)) == []
    # the same requests and steps tables, to the byte
    assert dg.requests.equals(trace.requests) and dg.steps.equals(trace.steps)
    assert dg.useful_slot_steps == int((trace.batch["kind"] != "padding").sum())


def test_digest_keeps_no_token_rows_and_refuses_the_oracle():
    dg = simulate(_mixed(), digest=True)
    assert not hasattr(dg, "batch") and not hasattr(dg, "kv")
    assert len(dg.gaps) > 0 and (dg.gaps["max"] >= dg.gaps["mean"]).all()
    with pytest.raises(ValueError, match="digest"):
        import io
        simulate(_mixed(50), digest=True, oracle_out=io.StringIO())


class _SortEachPeek:
    """The keyed queue as it was, the whole queue sorted on every peek, in exact arithmetic
    (aging as written: 0.05 is 1/20): the reference order."""

    def __init__(self, aging=0.0, **kw):
        from collections import deque
        self.q, self.aging, self.tenant_cap = deque(), float(aging), int(kw.get("tenant_cap") or 0)

    def __len__(self):
        return len(self.q)

    def __iter__(self):
        return iter(sorted(self.q, key=lambda s: (self.key(s), s.add_seq)))

    def add(self, seq):
        self.q.append(seq)

    prepend = add

    def remove(self, seq):
        self.q.remove(seq)

    def peek(self, ctx):
        g = Fraction(repr(self.aging))
        for seq in sorted(self.q, key=lambda s: (Fraction(repr(self.key(s))) - g * (ctx.step - s.queued_step),
                                                 s.add_seq)):
            if self._eligible(seq, ctx):
                return seq
        return None


@pytest.mark.parametrize("policy,aging,cap", [("sjf", 0, 0), ("spf", 0, 0), ("sjf", 0.1, 0), ("sjf", 2.5, 0),
                                               ("priority_aging", 0.05, 0), ("sjf", 0, 2), ("spf", 0.7, 1)])
def test_keyed_heap_serves_in_the_sorted_order(monkeypatch, policy, aging, cap):
    wl = generate(300, seed=11, arrival="poisson", rate=0.8, tenants={"a": 1, "b": 1}, priorities=[0, 1, 2],
                  prompt={"dist": "lognormal", "median": 40, "sigma": 1.0, "max": 300},
                  output={"dist": "lognormal", "median": 10, "sigma": 1.2, "max": 100},
                  config={"num_gpu_blocks": 90, "block_size": 16, "max_num_batched_tokens": 128, "max_num_seqs": 8})
    assert len({r.priority for r in wl.requests}) == 3
    config = {"policy": policy, "aging": aging, "tenant_cap": cap}
    heap = oracle_jsonl(wl, config)
    for name in ("__init__", "__len__", "__iter__", "add", "prepend", "remove", "peek"):
        monkeypatch.setattr(KeyedQueue, name, getattr(_SortEachPeek, name))
    assert oracle_jsonl(wl, config) == heap


def test_sim_run_without_a_trace_file_prints_the_traces_metrics(tmp_path, capsys):
    from sim.__main__ import main
    wl = _mixed(200)
    path = tmp_path / "w.json"
    path.write_text(wl.dumps())
    assert main(["run", str(path), "--slo", '{"ttft": 40, "tpot": 3, "e2e": 400}']) == 0   # a Digest
    printed = json.loads(capsys.readouterr().out)
    full = json.loads(dumps_strict(summary(simulate(wl), slo=SLO_T)))   # as the command prints it
    assert _same({k: (math.nan if v is None else v) for k, v in full.items()},
                 {k: (math.nan if v is None else v) for k, v in printed.items()}) == []


def test_a_run_past_the_row_cap_stops_with_a_plain_message(monkeypatch):
    wl = _mixed(300, seed=21)
    rows = len(simulate(wl).batch)
    with pytest.raises(RuntimeError, match=r"more than 1,000 token rows .* `python -m sim run`"):
        simulate(wl, max_batch_rows=1000)
    assert simulate(wl, max_batch_rows=rows).num_steps > 0          # under the cap: runs
    assert simulate(wl, digest=True, max_batch_rows=1000).num_steps > 0   # a Digest keeps no rows
    import ui.runs
    monkeypatch.setattr(ui.runs, "MAX_BATCH_ROWS", 1000)   # the pages' cap goes to the run
    with pytest.raises(RuntimeError, match="token rows"):
        ui.runs.run_trace(wl, {"max_num_seqs": 23}, "units")


@pytest.mark.parametrize("config", [{}, {"scheduler": "static"}, {"preemption_mode": "swap"}])
def test_batch_rows_kept_in_chunks_give_the_same_trace_bytes(monkeypatch, config):
    import importlib
    simulate_module = importlib.import_module("sim.simulate")   # the module (sim.simulate is also the function)
    wl = _mixed(250, seed=5)
    whole = simulate(wl, config).to_bytes()
    monkeypatch.setattr(simulate_module, "BATCH_CHUNK_ROWS", 37)   # dozens of flushes, one mid-step
    chunked = simulate(wl, config)
    assert chunked.to_bytes() == whole and len(chunked.batch) > 37 * 10
