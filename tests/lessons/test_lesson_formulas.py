"""The lesson's printed figures, computed by sim.lessons.lesson, compared with the lesson's output lines.

Expected numbers are parsed from tests/fixtures/lesson.txt (a copy of the lesson).  Each value
must print with the lesson's exact digits at the lesson's precision.
"""

import json
import re
from pathlib import Path

import pytest

from sim.cost import UnitsCost
from sim.lessons import lesson
from sim.lessons.admission import QueueSetup
from sim.lessons.queueing import BernoulliArrivals

LESSON = (Path(__file__).resolve().parents[1] / "fixtures" / "lesson.txt").read_text()
NUM = r"(-?\d+(?:\.\d+)?)"


def lines_matching(pattern):
    """All matches of ``pattern`` against whole lines of the lesson, as tuples of strings."""
    found = [m.groups() for m in re.finditer(pattern, LESSON, re.MULTILINE)]
    assert found, f"no line of the lesson matches {pattern!r}"
    return found


def same_print(value, text):
    """``value`` shows as ``text`` when printed with ``text``'s number of decimals."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    if decimals == 0:
        return isinstance(value, int) and value == int(text)
    return f"{value:.{decimals}f}" == text and value == float(text)


def assert_printed(value, text, what):
    assert same_print(value, text), f"{what}: computed {value!r}, lesson prints {text}"


def test_printed_rounds_half_up_like_java():
    assert lesson.printed(0.125, 2) == 0.13  # exact binary half: Java rounds up, Python's round() down
    assert lesson.printed(2.675, 2) == 2.68  # Java rounds the shortest decimal form, 2.675
    assert lesson.printed(199.49, 0) == 199 and isinstance(lesson.printed(199.5, 0), int)
    assert lesson.printed(199.5, 0) == 200


def test_example1_decode_utilization():
    expected = lines_matching(rf"^\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}%$")
    result = lesson.decode_utilization()
    assert len(result["rows"]) == len(expected) == 4
    fields = ["batch", "bytes_gb", "step_ms", "tok_s", "tok_s_per_seq", "flop_util_pct"]
    for row, texts in zip(result["rows"], expected):
        for name, text in zip(fields, texts):
            assert_printed(row[name], text, f"batch {row['batch']} {name}")
    (fit,), = lines_matching(r"fit next to the weights: (\d+)$")
    assert_printed(result["fit_sequences"], fit, "fit_sequences")


def test_example4_prefill_interference():
    (first, worst), = lines_matching(rf"^long request: first token after {NUM} units; worst gap for the decoders {NUM} units$")
    result = lesson.prefill_interference()
    assert_printed(result["long_first_token"], first, "long_first_token")
    assert_printed(result["worst_gap"], worst, "worst_gap")


def test_example4_timeline_matches_every_step():
    expected = lines_matching(rf"^step (\d): +(\d+) tokens, cost +{NUM}, decoders get a token at t= *{NUM} \(gap +{NUM}\)")
    run = lesson.decoders_with_long_prompt(4, 4000, None, UnitsCost(), arrival_step=4, last_step=7)
    assert len(run["steps"]) == len(expected) == 7
    previous = 0.0
    for step, (number, tokens, cost, clock, gap) in zip(run["steps"], expected):
        assert step["step"] == int(number) and step["tokens"] == int(tokens)
        assert_printed(lesson.printed(step["cost"], 2), cost, "cost")
        assert_printed(lesson.printed(step["clock"], 2), clock, "clock")
        assert_printed(lesson.printed(step["clock"] - previous, 2), gap, "gap")
        previous = step["clock"]


def test_example5_chunked_prefill():
    expected = lines_matching(rf"^budget +(\d+): prompt in +(\d+) steps, long request first token at +{NUM}, worst decoder gap +{NUM}$")
    rows = lesson.chunked_prefill()
    assert len(rows) == len(expected) == 4
    for row, texts in zip(rows, expected):
        for name, text in zip(["budget", "steps", "first_token", "worst_gap"], texts):
            assert_printed(row[name], text, f"budget {row['budget']} {name}")


def test_example7_littles_law():
    expected = lines_matching(rf"^p={NUM} limit= *(\w+): L= *{NUM}  lambda={NUM}  W= *{NUM}  lambda\*W= *{NUM}  rejected (\d+) of (\d+)$")
    rows = lesson.littles_law()
    assert len(rows) == len(expected) == 4
    for row, (p, limit, *texts) in zip(rows, expected):
        assert row["p"] == float(p)
        assert row["limit"] == (None if limit == "none" else int(limit))
        for name, text in zip(["L", "lambda", "W", "lambda_W", "rejected", "arrived"], texts):
            assert_printed(row[name], text, f"p={p} limit={limit} {name}")


def test_example7_capacity_line():
    (slots, service, capacity), = lines_matching(rf"^capacity: (\d+) slots / (\d+) ticks = {NUM} requests per tick$")
    assert f"{QueueSetup(slots=int(slots), service_ticks=int(service)).capacity:.2f}" == capacity


def test_bernoulli_arrivals_follow_java_random():
    src = BernoulliArrivals(1.0, 0)
    assert all(src.arrivals(t) == 1 for t in range(50))
    lesson_src = BernoulliArrivals(0.44, 11)
    assert sum(lesson_src.arrivals(t) for t in range(20_000)) == 8831  # the lesson's count


def test_example8_cost_lines():
    (swap,), = lines_matching(rf"out and back: {NUM} ms$")
    (recompute,), = lines_matching(rf"165\.2 TFLOP/s at 50%: {NUM} ms$")
    result = lesson.preemption_costs()
    assert_printed(result["swap_ms"], swap, "swap_ms")
    assert_printed(result["recompute_ms"], recompute, "recompute_ms")


def test_example10_disaggregation():
    headers = lines_matching(rf"^prompt +(\d+): KV +(\d+) MiB, prefill compute +{NUM} ms$")
    link_times = [t for (t,) in lines_matching(rf"^    (?:NVLink|InfiniBand|Ethernet).* {NUM} ms$")]
    rows = lesson.disaggregation()
    assert len(rows) == len(headers) == 3 and len(link_times) == 9
    for i, (row, (prompt, mib, prefill)) in enumerate(zip(rows, headers)):
        assert_printed(row["prompt"], prompt, "prompt")
        assert_printed(row["kv_mib"], mib, "kv_mib")
        assert_printed(row["prefill_ms"], prefill, "prefill_ms")
        for value, text in zip(row["link_ms"], link_times[3 * i:3 * i + 3]):
            assert_printed(value, text, f"prompt {prompt} link_ms")


def test_figures_are_json():
    figures = lesson.figures()
    assert set(figures) == {"decode_utilization", "static_batching", "continuous_batching",
                            "prefill_interference", "chunked_prefill", "policies", "littles_law",
                            "preemption", "tenant_fairness", "disaggregation", "mini_vllm"}
    assert {k: figures["preemption"][k] for k in ("swap_ms", "recompute_ms")} == lesson.preemption_costs()
    assert json.loads(json.dumps(figures)) == figures


def test_budget_must_leave_room():
    with pytest.raises(ValueError):
        lesson.decoders_with_long_prompt(4, 100, 4, UnitsCost())
