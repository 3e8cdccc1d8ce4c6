"""The simulator against traces of the real vLLM 0.33.0 scheduler (tests/fixtures/vllm,
copied from shared/vllm/cases). Every line must be identical: all fields, byte for byte."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "fixtures" / "vllm"
NAMES = sorted(p.name[: -len(".workload.json")] for p in CASES.glob("*.workload.json"))
FIELDS = ["scheduled", "preempted", "finished", "free_blocks", "running", "waiting"]


def test_all_cases_present():
    assert len(NAMES) == 11


@pytest.mark.parametrize("name", NAMES)
def test_case_identical(name):
    wl = Workload.load(str(CASES / f"{name}.workload.json"))
    ours = oracle_jsonl(wl).splitlines()
    theirs = (CASES / f"{name}.vllm.jsonl").read_text().splitlines()
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        ja, jb = json.loads(a), json.loads(b)
        for f in FIELDS:
            assert ja[f] == jb[f], (name, ja["step"], f)
        assert a == b, (name, ja["step"])


def test_cli_trace_and_checker(tmp_path):
    """`python -m sim trace` output passes the oracle's own checker with --against."""
    name = "preempt_fcfs"
    out = tmp_path / "t.jsonl"
    subprocess.run([sys.executable, "-m", "sim", "trace", str(CASES / f"{name}.workload.json"), "-o", str(out)],
                   cwd=ROOT, check=True)
    r = subprocess.run([sys.executable, str(CASES / "check_trace.py"), str(CASES / f"{name}.workload.json"),
                        str(out), "--against", str(CASES / f"{name}.vllm.jsonl")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    assert "traces agree" in r.stdout


def test_cli_rejects_impossible_workload(tmp_path):
    wl = {"config": {"num_gpu_blocks": 3, "block_size": 4}, "requests": [
        {"id": "big", "arrival_step": 0, "prompt_len": 40, "max_tokens": 2}]}
    p = tmp_path / "w.json"
    p.write_text(json.dumps(wl))
    r = subprocess.run([sys.executable, "-m", "sim", "trace", str(p)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode != 0
    assert "usable blocks" in r.stderr
