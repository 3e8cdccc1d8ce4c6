"""The simulator against vLLM 0.33.0's real AsyncScheduler, driven as 0.33.0's
EngineCore.step_with_batch_queue drives it, on the 52 random draws of tests/test_vllm034_random.py
with cache-aware admission left out (0.33 has none): tests/fixtures/vllm033_async_random, made by
`bench/vllm_oracle/make_random.py --vllm 0.33` with the project's harness (trace034.py, which runs
0.33.0 too). Every line must be identical, byte for byte, under vllm_version 0.33 with async
scheduling; under 0.34's rules or in sync mode some of them differ, so the version and the mode
are what is being held."""
import json
import sys
from pathlib import Path

import pytest

from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "fixtures" / "vllm033_async_random"
NAMES = sorted(p.name[: -len(".workload.json")] for p in CASES.glob("*.workload.json"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))
sys.path.insert(0, str(ROOT / "bench" / "vllm_oracle"))
from check_trace import check_invariants  # noqa: E402  (the shared oracle's checker)
import make_random  # noqa: E402  (plain Python: vLLM is imported only to trace)


def _theirs(name: str) -> list[str]:
    return (CASES / f"{name}.async.vllm.jsonl").read_text().splitlines()


def test_the_draws_are_the_generators_without_admission():
    assert len(NAMES) == 52
    for name in NAMES:
        profile, k = name.rsplit("_", 1)
        wl = json.loads((CASES / f"{name}.workload.json").read_text())
        assert wl == make_random.for_033(make_random.PROFILES[profile.replace("033a", "034")](int(k), 34000)), name
        assert wl["config"]["vllm_version"] == "0.33" and "cache_aware_admission_window" not in wl["config"]


@pytest.mark.parametrize("name", NAMES)
def test_random_case_identical_under_0_33_async(name):
    wl = Workload.load(str(CASES / f"{name}.workload.json"))
    ours = oracle_jsonl(wl, {"async_scheduling": True}).splitlines()
    theirs = _theirs(name)
    for a, b in zip(ours, theirs):
        if a != b:
            ja, jb = json.loads(a), json.loads(b)
            pytest.fail(f"{name} line {ja['step']}: "
                        f"{ {k: (ja.get(k), jb.get(k)) for k in {*ja, *jb} if ja.get(k) != jb.get(k)} } (ours, vLLM)")
    assert len(ours) == len(theirs), name
    assert check_invariants(wl.to_json(), [json.loads(x) for x in theirs]) == []


def test_the_version_and_the_mode_matter():
    """0.34's rules (no threshold cut with chunking off) and sync mode part from some traces."""
    as_034 = as_sync = 0
    for name in NAMES:
        wl = Workload.load(str(CASES / f"{name}.workload.json"))
        theirs = _theirs(name)
        as_034 += oracle_jsonl(wl, {"async_scheduling": True, "vllm_version": "0.34"}).splitlines() != theirs
        as_sync += oracle_jsonl(wl, {"async_scheduling": False}).splitlines() != theirs
    assert as_sync == len(NAMES) and as_034 >= 1
