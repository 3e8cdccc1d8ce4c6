"""The simulator against vLLM's real scheduler classes on bigger, stranger draws than the
committed random ones (bench/vllm_oracle/make_random.py `--wide N` / `--pressure N` `--vllm V
--seed S`, traced with the project's harness, trace034.py): the ones a hunt found parting from
the simulator, kept here once mended (tests/fixtures/vllm_wide, gzip). Every line must be
identical, sync and async.

- wide032_024 (vLLM 0.32.0, seed 779000, draw 24): under the priority policy, a request whose
  allocation fails preempts the lowest-priority running request. Here that victim came before it
  in the running list and had been skipped, not scheduled (async: its last token was in flight).
  vLLM moves its loop index back whenever the victim's index is below it (scheduler.py
  `victim_index < req_index`); the simulator moved it back only for a victim it had scheduled, so
  it skipped the next running request (r041, at engine call 121).
- wide032_017 (vLLM 0.32.0, seed 920000, draw 17): the same, at engine call 76 (r079 skipped).
- pressure032_090 (vLLM 0.32.0, seed 950000, draw 90): the same, at engine call 54 (r024).
Of 1,420 such draws traced sync and async (2,840 traces: 980 wide, 360 pressure and 80 of the
usual profiles at scale 4; 1,520 traces under 0.34.0, 660 under 0.33.0, 660 under 0.32.0),
these three parted before the mend, all 0.32 async; none after it.

- fork034_001, fork034_030, fork034_022 (vLLM 0.34.0, seed 31000, draws 1, 30 and 22 of `--fork`):
  prompts given as token ids that share a trunk for a random length, often ending inside a
  block, then part: prefix hits on partial trunks, under priority with blocks of 4 (42 hits),
  FCFS with a cache-aware window of 19 and 7 preemptions, and priority with blocks of 32 and 22
  preemptions. None of 680 such traces parted (0.34.0, 0.33.0, 0.32.0, 0.30.0, 0.27.1, 0.22.1,
  0.18.1 and 0.11.2; session of 2026-12-06); these three are kept to hold the profile."""
import gzip
import json
import sys
from pathlib import Path

import pytest

from oracle_diff import assert_same_lines
from sim.simulate import oracle_jsonl
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
WIDE = ROOT / "tests" / "fixtures" / "vllm_wide"
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "vllm"))
sys.path.insert(0, str(ROOT / "bench" / "vllm_oracle"))
from check_trace import check_invariants  # noqa: E402  (the shared oracle's checker)
import make_random  # noqa: E402  (plain Python: vLLM is imported only to trace)

# name -> (vLLM version, seed, draw); the profile is the name's head
DRAWS = {"wide032_024": ("0.32", 779000, 24), "wide032_017": ("0.32", 920000, 17),
         "pressure032_090": ("0.32", 950000, 90), "fork034_001": ("0.34", 31000, 1),
         "fork034_030": ("0.34", 31000, 30), "fork034_022": ("0.34", 31000, 22)}
MAKE = {"wide": make_random.draw_wide, "pressure": make_random.draw_pressure, "fork": make_random.draw_fork}
CASES = [(name, mode) for name in DRAWS for mode in ("sync", "async")]


def test_every_fixture_is_a_listed_draw_of_the_generator():
    names = sorted(p.name[: -len(".workload.json")] for p in WIDE.glob("*.workload.json"))
    assert names == sorted(DRAWS)
    for name, (version, seed, k) in DRAWS.items():
        wl = json.loads((WIDE / f"{name}.workload.json").read_text())
        assert wl == MAKE[name.split("0", 1)[0]](k, seed, version), name


@pytest.mark.parametrize("name,mode", CASES)
def test_wide_draw_identical(name, mode):
    wl = Workload.load(str(WIDE / f"{name}.workload.json"))
    ours = oracle_jsonl(wl, {"async_scheduling": mode == "async"}).splitlines()
    theirs = gzip.decompress((WIDE / f"{name}.{mode}.vllm.jsonl.gz").read_bytes()).decode().splitlines()
    assert_same_lines(f"{name} {mode}", ours, theirs)
    assert check_invariants(wl.to_json(), [json.loads(x) for x in theirs]) == []


def test_a_skipped_victim_before_the_requester_moves_the_loop_back():
    """The case itself, in the real trace: at engine call 121 the victim (r035, last token in
    flight, not scheduled) stood before the requester (r040), and the request after the requester
    (r041) was still scheduled."""
    lines = [json.loads(x) for x in gzip.decompress((WIDE / "wide032_024.async.vllm.jsonl.gz").read_bytes())
             .decode().splitlines()]
    call = next(x for x in lines if x["step"] == 121)
    before = next(x for x in lines if x["step"] == 120)["running"]
    assert call["preempted"] == ["r035"] and "r035" not in call["scheduled"]
    assert before.index("r035") < before.index("r040") < before.index("r041")
    assert {"r040", "r041"} <= set(call["scheduled"])
