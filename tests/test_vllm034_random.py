"""The simulator against vLLM 0.34.0's real scheduler classes on 52 random configurations and
workloads nobody chose (40 draws, 6 of them pressed into a pool barely above one request, 6 into
budgets of a few tokens), each traced in sync mode (Scheduler, driven as EngineCore.step) and in
async mode (AsyncScheduler, driven as EngineCore.step_with_batch_queue with its queue of 2):
tests/fixtures/vllm034_random, made by bench/vllm_oracle/make_random.py with the project's own
harness bench/vllm_oracle/trace034.py (vLLM pinned in bench/vllm_oracle/requirements.txt). Every
line must be identical, byte for byte.

The draws vary max_num_seqs, the token budget, the KV pool (from barely one longest request, which
preempts, to ample), block size, chunked prefill, the long-prefill threshold, prefix caching with
shared prefixes, fcfs / priority, cache-aware admission, scheduler_reserve_full_isl, the
watermark, max_model_len and the arrivals (bursts, spread, idle gaps).

That the harness itself gives the real traces back is checked where vLLM 0.34.0 is installed, not
in CI: `python bench/vllm_oracle/check_harness.py --python ORACLE_PYTHON`."""
import json
import sys
from pathlib import Path

import pytest

from oracle_diff import assert_same_lines
from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "fixtures" / "vllm034_random"
ORACLE = ROOT / "bench" / "vllm_oracle"
NAMES = sorted(p.name[: -len(".workload.json")] for p in CASES.glob("*.workload.json"))
MODES = ("sync", "async")
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))
sys.path.insert(0, str(ORACLE))
from check_trace import check_invariants  # noqa: E402  (the shared oracle's checker)
import make_random  # noqa: E402  (plain Python: vLLM is imported only to trace)


def test_all_draws_present():
    assert NAMES == sorted([f"rand034_{k:02d}" for k in range(40)]
                           + [f"{p}_{k:02d}" for p in ("tight034", "tiny034") for k in range(6)])
    for name in NAMES:
        for mode in MODES:
            assert (CASES / f"{name}.{mode}.vllm.jsonl").stat().st_size > 0
    assert sum(p.stat().st_size for p in CASES.iterdir()) < 5_000_000


def test_the_draws_are_the_generators():
    """The committed workloads are what make_random.py draws (seed 34000), so they can be re-made."""
    for name in NAMES:
        profile, k = name.rsplit("_", 1)
        wl = json.loads((CASES / f"{name}.workload.json").read_text())
        assert wl == make_random.PROFILES[profile](int(k), 34000), name
        assert wl["config"]["vllm_version"] == "0.34" and "async_scheduling" not in wl["config"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_random_case_identical(name, mode):
    wl = Workload.load(str(CASES / f"{name}.workload.json"))
    ours = oracle_jsonl(wl, {"async_scheduling": mode == "async"}).splitlines()
    theirs = (CASES / f"{name}.{mode}.vllm.jsonl").read_text().splitlines()
    assert_same_lines(f"{name} {mode}", ours, theirs)
    assert check_invariants(wl.to_json(), [json.loads(x) for x in theirs]) == []


def test_the_draws_reach_what_they_are_for():
    """Across the draws: preemptions, idle calls, drains, requests finished by a token that landed
    after their preemption, prefix-cache hits, both policies, chunking off, cache-aware admission."""
    seen = dict.fromkeys(("preempted", "idle", "drain", "finished_waiting", "hit"), 0)
    for name in NAMES:
        for mode in MODES:
            lines = [json.loads(x) for x in (CASES / f"{name}.{mode}.vllm.jsonl").read_text().splitlines()]
            waiting_before = set()
            for line in lines:
                seen["preempted"] += len(line["preempted"])
                seen["idle"] += bool(line.get("idle"))
                seen["drain"] += bool(line.get("drain"))
                seen["finished_waiting"] += len(set(line["finished"]) & (waiting_before | set(line["preempted"])))
                seen["hit"] += sum(1 for rid, c in line["computed_before"].items() if c and rid in waiting_before)
                waiting_before = set(line["waiting"])
    assert all(seen.values()), seen
    cfgs = [json.loads((CASES / f"{n}.workload.json").read_text())["config"] for n in NAMES]
    assert {c["policy"] for c in cfgs} == {"fcfs", "priority"}
    assert any(not c["enable_chunked_prefill"] for c in cfgs)
    assert any(c.get("cache_aware_admission_window") for c in cfgs)
    assert any(c.get("scheduler_reserve_full_isl") is False for c in cfgs)
