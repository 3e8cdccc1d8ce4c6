"""The lesson's scheduler-driven examples (2, 3, 6, 8, 9, 12), computed by sim.lessons.lesson through the
simulator, compared with the lesson's printed output; and unit tests of the static scheduler.

Expected values are parsed from tests/fixtures/lesson.txt (a copy of the lesson), never typed in.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.lessons import lesson
from sim.simulate import SCHEDULERS, simulate
from sim.static import StaticScheduler
from sim.trace import Trace
from sim.workload import Request, Workload
from test_lesson_formulas import NUM, assert_printed, lines_matching

ROOT = Path(__file__).resolve().parents[2]


def ints(text):
    return [int(x) for x in re.findall(r"\d+", text)]


TOTALS = r"^total steps (\d+), useful tokens (\d+) of (\d+) slot-steps \((\d+)%\)$"
FINISH = rf"^finish step per request: \[([\d, ]+)\], mean {NUM}$"


def check_batching(result, totals, finish):
    steps, useful, slot_steps, pct = (int(x) for x in totals)
    assert result["steps"] == steps
    assert result["useful_tokens"] == useful
    assert result["slot_steps"] == slot_steps
    assert 100 * result["useful_tokens"] // result["slot_steps"] == pct  # the lesson's integer division
    assert result["finish_steps"] == ints(finish[0])
    assert str(result["mean_finish"]) == finish[1]  # Java's Double.toString


# -- Example 2 ----------------------------------------------------------------------------------

def test_example2_static_batching():
    totals, finish = lines_matching(TOTALS)[0], lines_matching(FINISH)[0]
    check_batching(lesson.static_batching(), totals, finish)


def test_example2_group_lines_from_the_trace():
    """Each printed group line (members, steps it runs, useful of slot-steps) read off the trace:
    the group's rows are its slot-steps, its sampled rows the useful ones."""
    expected = lines_matching(r"^batch \[([\d, ]+)\] runs (\d+) steps, (\d+) of (\d+) slot-steps used$")
    lens = lesson.LESSON_OUTPUT_LENS
    trace = simulate(lesson._generating(lens), {"scheduler": "static", "max_num_seqs": 4})
    ev, b = trace.events, trace.batch
    admits = ev[ev["kind"] == "admit"]
    starts = sorted(set(admits["step"]))
    assert len(starts) == len(expected)
    bounds = starts + [trace.steps["step"].max() + 1]
    for (members, runs, used, slot_steps), lo, hi in zip(expected, bounds, bounds[1:]):
        ids = list(admits[admits["step"] == lo]["request"])
        assert [lens[int(i[1:])] for i in ids] == ints(members)
        rows = b[(b["step"] >= lo) & (b["step"] < hi)]
        assert hi - lo == int(runs)
        assert int(rows["sampled"].sum()) == int(used)
        assert len(rows) == int(slot_steps)
        assert set(rows["kind"]) == {"prefill", "decode", "padding"}


# -- Example 3 ----------------------------------------------------------------------------------

def test_example3_continuous_batching():
    totals, finish = lines_matching(TOTALS)[1], lines_matching(FINISH)[1]
    result = lesson.continuous_batching()
    check_batching(result, totals, finish)
    joined = lines_matching(r"^step +(\d+):(.*?)   <- a waiting request joined$")
    assert result["join_steps"] == [int(s) for s, _ in joined]


def test_example3_slot_lines_from_the_trace():
    """The printed slot occupancy at each join step, from the batch table's slot column."""
    trace = simulate(lesson._generating(lesson.LESSON_OUTPUT_LENS), {"max_num_seqs": 4})
    for step, slots in lines_matching(r"^step +(\d+):(.*?)   <- a waiting request joined$"):
        rows = trace.batch_at(int(step))
        lane = {int(s): r for s, r in zip(rows["slot"], rows["request"])}
        assert "".join(f" {lane[s]}" if s in lane else "  -" for s in range(4)) == slots


# -- Example 6 ----------------------------------------------------------------------------------

def test_example6_policies():
    expected = lines_matching(rf"^(fcfs|shortest-first|priority) +order ([A-F ]+?)  mean wait {NUM}$")
    result = lesson.policies()
    assert len(expected) == 3
    for name, order, wait in expected:
        row = result[name.replace("-", "_")]
        assert row["order"] == order.split()
        assert_printed(row["mean_wait"], wait, f"{name} mean_wait")
    (start, waited), = lines_matching(r"^shortest-first: LONG starts at (\d+) after waiting (\d+)$")
    assert result["starvation_long_start"] == int(start) == int(waited)  # LONG arrived at 0


def test_example6_wait_is_first_scheduled_minus_one_minus_arrival():
    trace = lesson.one_server(lesson.LESSON_JOBS, "fcfs")
    r = trace.requests.set_index("request")
    assert r.loc["A", "first_scheduled_step"] == 1 and r.loc["B", "first_scheduled_step"] == 41
    assert (trace.steps["num_seqs"] <= 1).all()


# -- Example 8 ----------------------------------------------------------------------------------

def test_example8_preemption():
    (step, victim, freed, tokens), = lines_matching(
        r"^step (\d+): no free block for r\d, preempt (r\d) \(frees (\d+) blocks, (\d+) tokens to recompute\)$")
    (running, waiting, total), = lines_matching(
        r"^after 40 steps: running ((?:r\d=\d+ ?)+), waiting ((?:r\d ?)+), tokens to recompute (\d+)$")
    (swap,), = lines_matching(rf"out and back: {NUM} ms$")
    (recompute,), = lines_matching(rf"165\.2 TFLOP/s at 50%: {NUM} ms$")
    result = lesson.preemption()
    assert result["preempt_step"] == int(step)
    assert result["victim"] == victim
    assert result["freed_blocks"] == int(freed)
    assert result["recompute_tokens"] == int(total) == int(tokens)
    assert result["final_tokens"] == {k: int(v) for k, v in re.findall(r"(r\d)=(\d+)", running)}
    assert list(result["final_tokens"]) == re.findall(r"(r\d)=", running)
    assert result["waiting"] == waiting.split()
    assert_printed(result["swap_ms"], swap, "swap_ms")
    assert_printed(result["recompute_ms"], recompute, "recompute_ms")


# -- Example 9 ----------------------------------------------------------------------------------

def test_example9_tenant_fairness():
    expected = lines_matching(r"^(fcfs|round-robin by tenant|round-robin, cap 3/tenant) *: tenant B finished (.*)$")
    keys = {"fcfs": "fcfs", "round-robin by tenant": "round_robin", "round-robin, cap 3/tenant": "round_robin_cap3"}
    result = lesson.tenant_fairness()
    assert set(result) == set(keys.values())
    for name, done in expected:
        pairs = [(r, int(s)) for r, s in re.findall(r"(B\d)@(\d+)", done)]
        assert list(result[keys[name]].items()) == pairs, name  # the lesson's print order too


def test_example9_cap_leaves_a_slot_idle_at_first():
    trace = lesson.tenant_run("round_robin", 3)
    first = trace.steps.set_index("step").loc[1]
    assert first["num_seqs"] == 3 and first["waiting"] == 9


# -- Example 12 ---------------------------------------------------------------------------------

def test_example12_mini_vllm():
    expected = lines_matching(
        r"^step +(\d+):((?: [A-C]\+\d+)+)  free blocks after scheduling (\d+)(?:  preempted \[([A-C, ]*)\])?((?:  [A-C] finished)*)$")
    rows = lesson.mini_vllm()
    assert len(rows) == len(expected) == 7
    for row, (step, sched, free, pre, fin) in zip(rows, expected):
        assert row["step"] == int(step)
        assert list(row["scheduled"].items()) == [(r, int(n)) for r, n in re.findall(r"([A-C])\+(\d+)", sched)]
        assert row["free_blocks_after_scheduling"] == int(free)
        assert row["preempted"] == (pre.replace(",", " ").split() if pre else [])
        assert row["finished"] == re.findall(r"([A-C]) finished", fin)


def test_example12_is_the_traced_case():
    """The lesson's loop is the conformance case lesson_abc_8blocks, which real vLLM produced."""
    case = ROOT / "tests" / "fixtures" / "vllm"
    oracle = [json.loads(line) for line in (case / "lesson_abc_8blocks.vllm.jsonl").read_text().splitlines()]
    rows = lesson.mini_vllm()
    assert [o["scheduled"] for o in oracle] == [r["scheduled"] for r in rows]
    assert [o["free_blocks_after_schedule"] for o in oracle] == [r["free_blocks_after_scheduling"] for r in rows]
    assert json.loads((case / "lesson_abc_8blocks.workload.json").read_text())["config"]["num_gpu_blocks"] == 8


# -- the CLI --------------------------------------------------------------------------------------

def test_cli_lesson_json_keys():
    out = subprocess.run([sys.executable, "-m", "sim", "lesson", "--json"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.count("\n") == 1
    doc = json.loads(out)
    assert set(doc) == {"decode_utilization", "static_batching", "continuous_batching", "prefill_interference",
                        "chunked_prefill", "policies", "littles_law", "preemption", "tenant_fairness",
                        "disaggregation", "mini_vllm"}
    assert set(doc["static_batching"]) == {"steps", "useful_tokens", "slot_steps", "finish_steps", "mean_finish"}
    assert set(doc["continuous_batching"]) == set(doc["static_batching"]) | {"join_steps"}
    assert set(doc["policies"]) == {"fcfs", "shortest_first", "priority", "starvation_long_start"}
    assert set(doc["preemption"]) == {"preempt_step", "victim", "freed_blocks", "recompute_tokens",
                                      "final_tokens", "waiting", "swap_ms", "recompute_ms"}
    assert set(doc["tenant_fairness"]) == {"fcfs", "round_robin", "round_robin_cap3"}
    assert set(doc["mini_vllm"][0]) == {"step", "scheduled", "free_blocks_after_scheduling", "preempted", "finished"}


# -- the static scheduler ---------------------------------------------------------------------------

def static(reqs, **cfg):
    return simulate(Workload(reqs), {"scheduler": "static", **cfg})


def test_static_is_registered():
    assert SCHEDULERS["static"] is StaticScheduler


def test_static_padding_rows():
    tr = static([Request("a", 1, 3), Request("b", 1, 1)], max_num_seqs=2)
    b = tr.batch
    assert list(b[b["request"] == "b"]["kind"]) == ["prefill", "padding", "padding"]
    pad = b[b["kind"] == "padding"]
    assert (pad["tokens"] == 0).all() and not pad["sampled"].any()
    assert list(pad["computed_before"]) == [1, 1]  # b's context: its 1-token prompt
    assert list(tr.steps["num_seqs"]) == [2, 2, 2]
    assert list(tr.steps["num_tokens"]) == [2, 1, 1]  # padding carries no tokens
    r = tr.requests.set_index("request")
    assert r.loc["b", "first_token_step"] == 1 and r.loc["b", "finish_step"] == 3  # returns with the group
    assert r.loc["b", "output_tokens"] == 1 and r.loc["a", "output_tokens"] == 3


def test_static_groups_form_only_when_nothing_runs():
    # c arrives while a group with a free place runs: it waits for the whole group to end
    tr = static([Request("a", 1, 4), Request("b", 1, 2), Request("c", 1, 1, arrival_step=1),
                 Request("d", 1, 1, arrival_step=1)], max_num_seqs=3)
    admit = tr.events[tr.events["kind"] == "admit"].set_index("request")["step"]
    assert dict(admit) == {"a": 1, "b": 1, "c": 5, "d": 5}
    assert list(tr.requests["finish_step"]) == [4, 4, 5, 5]
    assert tr.steps["num_seqs"].max() == 2


def test_static_group_size_is_max_num_seqs():
    tr = static([Request(f"r{i}", 2, i + 1) for i in range(5)], max_num_seqs=2)
    admit = tr.events[tr.events["kind"] == "admit"]
    assert list(admit.groupby("step").size()) == [2, 2, 1]
    assert list(tr.requests["finish_step"]) == [2, 2, 6, 6, 11]


def test_static_reserves_whole_sequences_and_frees_at_group_end():
    # blocks of 4: a needs ceil((5+7)/4) = 3, b ceil((3+2)/4) = 2, of 9 usable
    tr = static([Request("a", 5, 7), Request("b", 3, 2), Request("c", 1, 1)],
                num_gpu_blocks=10, block_size=4, max_num_seqs=2)
    s = tr.steps.set_index("step")
    assert s.loc[1, "free_blocks_after_schedule"] == 9 - 3 - 2
    assert (s.loc[1:6, "free_blocks"] == 4).all()  # b's blocks stay held while it pads
    assert s.loc[7, "free_blocks"] == 9  # the group ended at step 7: all freed
    kv = tr.kv
    rel = kv[kv["op"] == "release"]
    assert set(rel[rel["request"].isin(["a", "b"])]["step"]) == {7}
    assert (kv["op"] == "acquire").sum() == (kv["op"] == "release").sum()  # nothing leaked
    assert tr.steps["preempted"].sum() == 0


def test_static_head_of_line_on_blocks():
    # 4 usable blocks of 4: a takes 3 (12 tokens), b needs 2 and waits for the next group, and
    # so does c behind it although c would fit
    tr = static([Request("a", 6, 6), Request("b", 4, 4), Request("c", 1, 1)],
                num_gpu_blocks=5, block_size=4, max_num_seqs=3)
    admit = tr.events[tr.events["kind"] == "admit"].set_index("request")["step"]
    assert dict(admit) == {"a": 1, "b": 7, "c": 7}


def test_static_chunks_prompts_within_the_budget():
    tr = static([Request("a", 10, 2), Request("b", 10, 2)], max_num_batched_tokens=12, max_num_seqs=2)
    b = tr.batch
    assert list(zip(b["step"], b["request"], b["tokens"], b["kind"])) == [
        (1, "a", 10, "prefill"), (1, "b", 2, "prefill"),
        (2, "a", 1, "decode"), (2, "b", 8, "prefill"),
        (3, "a", 0, "padding"), (3, "b", 1, "decode")]
    assert (tr.steps["num_tokens"] <= 12).all()


def test_static_policy_and_trace_round_trip(tmp_path):
    tr = static([Request(f"r{i}", 1, n) for i, n in enumerate([9, 1, 8, 2])], max_num_seqs=2, policy="sjf")
    admit = tr.events[tr.events["kind"] == "admit"]
    assert list(admit["request"]) == ["r1", "r3", "r2", "r0"]
    p = tmp_path / "static.trace"
    tr.save(str(p))
    back = Trace.load(str(p))
    assert back.to_bytes() == tr.to_bytes()
    assert "padding" in set(back.batch["kind"])
    assert back.meta["scheduler"] == "static"


@st.composite
def static_scenarios(draw):
    n = draw(st.integers(1, 12))
    bs = draw(st.sampled_from([1, 4, 16]))
    reqs = [Request(f"q{i}", draw(st.integers(1, 30)), draw(st.integers(1, 10)),
                    arrival_step=draw(st.integers(0, 12)), tenant=draw(st.sampled_from(["a", "b"])))
            for i in range(n)]
    need = max(-(-(r.prompt_len + r.max_tokens) // bs) for r in reqs)
    cfg = {"num_gpu_blocks": draw(st.integers(need + 1, need + 20)), "block_size": bs,
           "max_num_batched_tokens": draw(st.integers(1, 48)), "max_num_seqs": draw(st.integers(1, 5)),
           "policy": draw(st.sampled_from(["fcfs", "sjf", "round_robin", "vtc"])),
           "tenant_cap": draw(st.sampled_from([0, 1, 2]))}
    return reqs, cfg


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(static_scenarios())
def test_static_properties(scenario):
    reqs, cfg = scenario
    tr = static(reqs, **cfg)
    s, b, r = tr.steps, tr.batch, tr.requests
    busy = s[~s["idle"]]
    assert (busy["num_tokens"] <= cfg["max_num_batched_tokens"]).all()
    assert (busy["num_seqs"] <= cfg["max_num_seqs"]).all()
    assert (r["output_tokens"] == r["max_tokens"]).all()
    assert int(b["sampled"].sum()) == int(r["max_tokens"].sum())
    assert s["free_blocks"].iloc[-1] == cfg["num_gpu_blocks"] - 1
    assert s["preempted"].sum() == 0
    # a group's members are admitted together and finish together
    admit = tr.events[tr.events["kind"] == "admit"].set_index("request")["step"]
    fin = r.set_index("request")["finish_step"]
    for step, members in admit.groupby(admit).groups.items():
        assert len({int(fin[m]) for m in members}) == 1
        # nothing else runs between a group's start and end
        end = int(fin[members[0]])
        rows = b[(b["step"] >= step) & (b["step"] <= end)]
        assert set(rows["request"]) == set(members)
