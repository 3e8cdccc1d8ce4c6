"""The simulator against vLLM 0.33.0's and 0.32.0's real AsyncScheduler, each driven as its
EngineCore.step_with_batch_queue drives it, on the 52 random draws of tests/test_vllm034_random.py
with cache-aware admission left out (neither has it): tests/fixtures/vllm033_async_random and
vllm032_async_random, made by `bench/vllm_oracle/make_random.py --vllm 0.33` / `--vllm 0.32` with
the project's harness (trace034.py, which runs both). Every line must be identical, byte for
byte, under that vllm_version with async scheduling; under 0.34's rules or in sync mode some of
them differ, so the version and the mode are what is being held."""
import json
import sys
from pathlib import Path

import pytest

from oracle_diff import assert_same_lines
from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
DIRS = {"0.33": FIXTURES / "vllm033_async_random", "0.32": FIXTURES / "vllm032_async_random"}
CASES = [(v, p.name[: -len(".workload.json")]) for v, d in DIRS.items() for p in sorted(d.glob("*.workload.json"))]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))
sys.path.insert(0, str(ROOT / "bench" / "vllm_oracle"))
from check_trace import check_invariants  # noqa: E402  (the shared oracle's checker)
import make_random  # noqa: E402  (plain Python: vLLM is imported only to trace)


def _workload(version: str, name: str) -> Workload:
    return Workload.load(str(DIRS[version] / f"{name}.workload.json"))


def _theirs(version: str, name: str) -> list[str]:
    return (DIRS[version] / f"{name}.async.vllm.jsonl").read_text().splitlines()


def test_the_draws_are_the_generators_without_admission():
    assert len(CASES) == 2 * 52
    for version, name in CASES:
        wl = json.loads((DIRS[version] / f"{name}.workload.json").read_text())
        assert wl == make_random.older_draw(name, version), name
        assert wl["config"]["vllm_version"] == version and "cache_aware_admission_window" not in wl["config"]


@pytest.mark.parametrize("version,name", CASES)
def test_random_case_identical_under_its_version_async(version, name):
    wl = _workload(version, name)
    ours = oracle_jsonl(wl, {"async_scheduling": True}).splitlines()
    theirs = _theirs(version, name)
    assert_same_lines(f"{version} {name}", ours, theirs)
    assert check_invariants(wl.to_json(), [json.loads(x) for x in theirs]) == []


@pytest.mark.parametrize("version", DIRS)
def test_the_version_and_the_mode_matter(version):
    """0.34's rules (no threshold cut with chunking off; 0.32: self-preemption too) and sync mode
    part from some traces."""
    names = [n for v, n in CASES if v == version]
    as_034 = as_sync = 0
    for name in names:
        wl, theirs = _workload(version, name), _theirs(version, name)
        as_034 += oracle_jsonl(wl, {"async_scheduling": True, "vllm_version": "0.34"}).splitlines() != theirs
        as_sync += oracle_jsonl(wl, {"async_scheduling": False}).splitlines() != theirs
    assert as_sync == len(names) and as_034 >= 1
