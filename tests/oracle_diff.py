"""The first line where the simulator's oracle lines and a real vLLM trace part, as a test failure
that names each field that differs (used by the tests that hold traces of vLLM's own classes)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sim.simulate import oracle_jsonl
from sim.workload import Workload


def assert_same_lines(label: str, ours: list[str], theirs: list[str]) -> None:
    """Fail at the first differing line with {field: (ours, vLLM)}; then on a length mismatch."""
    for a, b in zip(ours, theirs):
        if a != b:
            ja, jb = json.loads(a), json.loads(b)
            pytest.fail(f"{label} line {ja['step']}: "
                        f"{ {k: (ja.get(k), jb.get(k)) for k in {*ja, *jb} if ja.get(k) != jb.get(k)} } (ours, vLLM)")
    assert len(ours) == len(theirs), (label, len(ours), len(theirs))


def fixture_workload(folder: Path, name: str) -> Workload:
    return Workload.load(str(folder / f"{name}.workload.json"))


def traced_lines(folder: Path, name: str, mode: str) -> list[str]:
    """A committed trace of vLLM's own classes: <folder>/<name>.<mode>.vllm.jsonl.gz, as lines."""
    return gzip.decompress((folder / f"{name}.{mode}.vllm.jsonl.gz").read_bytes()).decode().splitlines()


def simulated_lines(wl, mode: str, version: str | None = None) -> list[str]:
    """The simulator's oracle lines for a workload in a mode (sync / async), under its own
    vllm_version or `version`."""
    over = {"async_scheduling": mode == "async", **({"vllm_version": version} if version else {})}
    return oracle_jsonl(wl, over).splitlines()
