"""Hostile files and CLI inputs (issue 19, item 3): each one runs or is refused within seconds
with one plain sentence naming the value and the rule; every JSON written is strict JSON.

Fixtures are made here, programmatically (a nesting bomb, NaN and absurd numbers, wrong types,
damaged recordings and traces), from the bundled samples where a real file is the base."""
from __future__ import annotations

import gzip
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

from sim import limits, metrics, scenarios
from sim.__main__ import main as sim_main
from sim.inputs import parse_workload
from sim.jsonout import dumps_strict, finite
from sim.simulate import oracle_jsonl, simulate
from sim.trace import Trace
from sim.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
ONE = {"id": "r7", "prompt_len": 4, "max_tokens": 2}


def strict_loads(text: str):
    """json.loads that refuses NaN and Infinity, as a strict JSON reader (jq, a browser) does."""
    def refuse(name):
        raise AssertionError(f"{name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def workload_bytes(*requests, config=None) -> bytes:
    # allow_nan: Python writes NaN/Infinity for us, as a hostile file would hold them
    return json.dumps({"config": config or {}, "requests": list(requests)}).encode()


MAX_REFUSAL = 200   # characters: every refusal is one line of at most this (issue 29)


def one_short_line(msg: str) -> str:
    assert "\n" not in msg and len(msg) <= MAX_REFUSAL, (len(msg), msg)   # never a 300-digit number
    return msg


def refused(data: bytes) -> str:
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as e:
        parse_workload(data, "hostile.json")
    assert time.perf_counter() - t0 < 5, "a refusal must come within seconds"
    return one_short_line(str(e.value))


# --------------------------------------------------------------------------------------------
# Nesting, size, encoding
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"requests": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"requests": [{"id": "a", "x": ' + b'{"k": ' * 3000 + b"1" + b"}" * 3000 + b"}]}",
], ids=["array bomb", "inside requests", "objects in a request"])
def test_a_nesting_bomb_is_refused_with_the_depth_and_the_limit(data):
    msg = refused(data)
    assert "levels deep" in msg and f"at most {limits.MAX_JSON_DEPTH} levels" in msg, msg


def test_brackets_in_strings_cannot_slip_a_bomb_past_the_depth_check():
    # strings full of "]" bring the bracket count down; the parser's recursion guard still says no
    data = b'["' + b"]" * 5000 + b'", ' + b"[" * 3000 + b"]" * 3000 + b"]"
    assert "too deep" in refused(data)


def test_brackets_inside_strings_do_not_count_as_nesting():
    wl = parse_workload(workload_bytes({**ONE, "id": "[" * 200, "tenant": "{" * 200}), "ok.json")
    assert wl.requests[0].id == "[" * 200 and wl.requests[0].tenant == "{" * 200


def test_the_depth_check_is_cheap_on_a_big_plain_workload():
    reqs = [{"id": f"r{i}", "arrival_step": i // 10, "prompt_len": 100, "max_tokens": 50} for i in range(200_000)]
    data = workload_bytes(*reqs)
    t0 = time.perf_counter()
    assert limits._too_deep(data) == 0
    assert time.perf_counter() - t0 < 1.0


def test_size_encoding_and_giant_integers():
    with pytest.raises(ValueError, match="JSON files are at most 1 MB"):
        limits.load_json(b" " * (2 << 20), max_bytes=1 << 20)
    assert "not UTF-8" in refused(b"\xff\xfe\x00garbage")
    assert "thousands of digits" in refused(b'{"requests": [{"id": "a", "prompt_len": ' + b"9" * 5000 + b"}]}")


# --------------------------------------------------------------------------------------------
# Numbers and types where counts and times go
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field,value,expected", [
    ("arrival_time", math.nan, "arrival_time of request r7 is NaN; arrival times must be finite numbers from 0"),
    ("arrival_time", math.inf, "arrival_time of request r7 is infinite; arrival times must be finite"),
    ("arrival_time", 1e18, "arrival_time of request r7 is 1e+18; arrival times must be finite numbers from 0 to 1e+12"),
    ("arrival_time", -1.0, "arrival_time of request r7 is -1; arrival times"),
    ("arrival_time", "soon", "arrival_time of request r7 is 'soon'; arrival times"),
    ("arrival_step", 10**18, "arrival_step of request r7 is 1e+18; arrival steps must be whole numbers from 0 to 1,000,000"),
    ("arrival_step", 1.5, "arrival_step of request r7 is 1.5; arrival steps must be whole numbers"),
    ("prompt_len", 1e300, "prompt_len of request r7 is 1e+300; token counts must be whole numbers from 1 to 10,000,000"),
    ("prompt_len", 2.5, "prompt_len of request r7 is 2.5; token counts must be whole numbers"),
    ("prompt_len", "10", "prompt_len of request r7 is '10'; token counts"),
    ("prompt_len", True, "prompt_len of request r7 is true; token counts"),
    ("prompt_len", [4], "prompt_len of request r7 is a list; token counts"),
    ("prompt_len", 0, "prompt_len of request r7 is 0; token counts must be whole numbers from 1"),
    ("max_tokens", math.nan, "max_tokens of request r7 is NaN; token counts"),
    ("max_tokens", 10**7 + 1, "max_tokens of request r7 is 10,000,001; token counts must be whole numbers from 1 to 10,000,000"),
    ("priority", 10**30, "priority of request r7 is 1e+30; priorities must be whole numbers"),
    ("prompt_seed", 0.5, "prompt_seed of request r7 is 0.5; prompt seeds"),
    ("tenant", {"a": 1}, "the tenant of request r7 is an object; it must be text"),
    ("tenant", "t" * 1000, "the tenant of request r7 is 1,000 characters long; at most 256"),
    ("prompt_token_ids", [1, 2, -3, 4], "request r7 has prompt token id -3; token ids must be whole numbers from 0"),
    ("prompt_token_ids", "1234", "prompt_token_ids of request r7 is '1234'; it must be a list of token ids"),
])
def test_a_bad_field_is_named_with_its_value_and_rule(field, value, expected):
    req = {**ONE, field: value}
    if field == "prompt_token_ids" and isinstance(value, list):
        req["prompt_len"] = len(value)
    msg = refused(workload_bytes(req))
    assert msg.startswith(expected), msg


def test_whole_floats_count_as_whole_numbers():
    wl = parse_workload(workload_bytes({**ONE, "prompt_len": 4.0, "max_tokens": 2.0, "arrival_step": 3.0}), "w")
    r = wl.requests[0]
    assert (r.prompt_len, r.max_tokens, r.arrival_step) == (4, 2, 3) and type(r.prompt_len) is int


@pytest.mark.parametrize("requests,expected", [
    ([["id", 1]], "request #1 is a list; each request must be a JSON object"),
    ([{"prompt_len": 3, "max_tokens": 1}], "request #1 has no id"),
    ([{**ONE, "id": [1]}], "the id of request #1 is a list; it must be text or a whole number"),
    ([{**ONE, "id": None}], "the id of request #1 is null"),
    ([{"id": "r7", "prompt_len": 3}], "request r7 has no max_tokens"),
])
def test_a_request_that_is_not_one_is_named(requests, expected):
    assert refused(json.dumps({"requests": requests}).encode()).startswith(expected)


def test_too_many_tenants_is_refused_before_the_pairwise_metrics():
    reqs = [{**ONE, "id": f"r{i}", "tenant": f"t{i}"} for i in range(limits.MAX_TENANTS + 1)]
    assert f"{limits.MAX_TENANTS + 1} tenants; at most {limits.MAX_TENANTS}" in refused(workload_bytes(*reqs))


@pytest.mark.parametrize("config,expected", [
    ({"watermark": math.nan}, "config watermark is NaN; it must be a finite number from 0 to 1"),
    ({"swap_space_bytes": math.inf}, "config swap_space_bytes is infinite"),
    ({"aging": "fast"}, "config aging is 'fast'"),
    ({"max_model_len": 1e300}, "config max_model_len is 1e+300; it must be a whole number"),
    ({"max_queued_tokens": -1}, "config max_queued_tokens is -1"),
    ({"policy": {"x": 1}}, "config policy is an object; it must be a name such as \"fcfs\""),
    ({"scheduler": ["vllm"]}, "config scheduler is a list"),
    ({"cont_batching": "yes"}, "config cont_batching is 'yes'; it must be true or false"),
    ({"k" * 500: 1}, "the config has a key of 500 characters"),
])
def test_a_bad_config_value_is_named(config, expected):
    assert refused(workload_bytes(ONE, config=config)).startswith(expected)


# Generated: every request field and every config key given each hostile value. Whatever the
# scheduler's own checks or sim/limits.py's say, a refusal is one line of at most MAX_REFUSAL.
HOSTILE_VALUES = [math.nan, math.inf, -math.inf, 1e300, 10**400, 10**20, -1, 0, 2.5, "x", "10", "y" * 300,
                  "[link](http://x)\n# two lines", [], [1, "a"], {}, {"k": 1}, True, False, None]
REQUEST_FIELDS = ["id", "prompt_len", "max_tokens", "arrival_step", "arrival_time", "priority", "prompt_seed",
                  "prompt_token_ids", "tenant", "prompt_text", "prompt_blocks"]


def _config_keys() -> list[str]:
    from dataclasses import fields

    from sim.scheduler import SchedulerConfig
    return sorted({f.name for f in fields(SchedulerConfig)} | set(limits.CONFIG_VALUES) | {"scheduler", "nope"})


@pytest.mark.parametrize("field", REQUEST_FIELDS)
def test_every_hostile_request_field_is_refused_in_one_short_line(field):
    for value in HOSTILE_VALUES:
        try:
            parse_workload(workload_bytes({**ONE, field: value}), "hostile.json")
        except ValueError as e:
            one_short_line(str(e))


@pytest.mark.parametrize("key", _config_keys())
def test_every_hostile_config_value_is_refused_in_one_short_line(key):
    for value in [*HOSTILE_VALUES, "nope"]:
        try:
            parse_workload(workload_bytes(ONE, config={key: value}), "hostile.json")
        except ValueError as e:
            one_short_line(str(e))


@pytest.mark.parametrize("data", [
    bytes(range(256)) * 64, b"\x00\x01\x02binary\n", b"", b"   \n", b"\xef\xbb\xbf" + bytes(range(128, 256)),
    b"a" * 5000 + b"," + b"b" * 5000 + b"\n1,2\n", b",".join([b"column%d" % i for i in range(500)]) + b"\n",
    b'{"a": 1}\n{"b": 2}\n', gzip.compress(bytes(range(256)) * 64), b"\x1f\x8bnot gzip",
    b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", b"PK\x03\x04" + bytes(100),
], ids=["binary", "control bytes", "empty", "blank", "bom then binary", "giant columns", "500 columns",
        "foreign JSON lines", "gzipped binary", "fake gzip", "a PDF", "a zip"])
def test_a_file_of_no_known_format_is_refused_in_one_short_line(data, tmp_path, capsys):
    msg = refused(data)
    assert "workload JSON" in msg or "gzip" in msg, msg
    rc, _ = cli(tmp_path, capsys, data, "run")
    one_short_line(rc.split(": ", 1)[1])


@pytest.mark.parametrize("knob", ["max_num_seqs", "num_gpu_blocks", "policy", "scheduler", "enable_prefix_caching",
                                  "watermark", "nope" * 40, "router.nope" * 20])
def test_every_hostile_grid_value_is_refused_in_one_short_line(knob):
    from sim.search import Grid, check_configs, values_from_text
    wl = scenarios.workload("lesson_abc")
    texts = ["", "x", "9" * 500, "1e300", "-1", "nan", ", ".join(["8"] * 500), "y" * 300, "[a](http://x)"]
    for attempt in ([lambda t=t: Grid.parse({knob: values_from_text(knob, t)}) for t in texts]
                    + [lambda v=v: Grid.parse({knob: [v]}) for v in HOSTILE_VALUES]):
        try:
            check_configs(wl, attempt().configs())
        except ValueError as e:
            one_short_line(str(e))


def test_every_hostile_slo_and_settings_file_is_refused_in_one_short_line():
    from sim.slo import SLO
    from ui.state import FORMAT, Setting, parse_settings_json
    for v in [*HOSTILE_VALUES, '{"ttft": "x"}', {"ttft": "y" * 300}, {"y" * 300: 1}, {"tenants": {"t" * 300: {"ttft": -1}}},
              {"priorities": {"9" * 300: {}}}, {"priorities": {"7": {"ttft": 10**400}}}]:
        try:
            SLO.parse(v)
        except (ValueError, TypeError) as e:
            one_short_line(str(e))
    settings = [Setting("keep_rate", 1.0, float, bounds=(0.0, 10.0)), Setting("keep_n", 2, int, bounds=(1, 9)),
                Setting("keep_s", "a", str, choices=("a", "b"))]
    for key in ["rate", "n", "s", "z" * 300]:
        for v in HOSTILE_VALUES:
            doc = {"format": FORMAT, "page": "t", "settings": {key: v, **({f"x{i}": 1 for i in range(9)} if key[0] == "z" else {})}}
            with pytest.raises(ValueError) as e:   # never an OverflowError: 10**400 as a float setting
                parse_settings_json(json.dumps(doc).encode(), "t", settings)
                raise ValueError("accepted")   # a value that fits: nothing to check
            if str(e.value) != "accepted":
                one_short_line(str(e.value))
    with pytest.raises(ValueError) as e:
        parse_settings_json(json.dumps({"format": FORMAT, "page": "p" * 300, "settings": {}}).encode(), "t", settings)
    one_short_line(str(e.value))


def test_run_help_spells_out_the_formats(capsys):
    with pytest.raises(SystemExit):
        sim_main(["run", "--help"])
    out = capsys.readouterr().out
    for label, what in limits.FORMATS:
        assert f"{label}: {what}" in out


def test_a_config_that_is_not_an_object():
    assert "the config is a list" in refused(json.dumps({"requests": [ONE], "config": [1]}).encode())


def test_prefix_caching_refuses_prompt_ids_it_would_take_minutes_to_make():
    n = limits.MAX_SEEDED_PROMPT_TOKENS // 1_000_000 + 1
    wl = Workload.from_json({"requests": [{"id": f"r{i}", "prompt_len": 1_000_000, "max_tokens": 1} for i in range(n)]})
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="at most 5,000,000 are made"):
        simulate(wl, {"enable_prefix_caching": True, "num_gpu_blocks": 1_000_000})
    assert time.perf_counter() - t0 < 2


# --------------------------------------------------------------------------------------------
# The CLI: a run or one line, and strict JSON out
# --------------------------------------------------------------------------------------------

def cli(tmp_path, capsys, data: bytes | None, *args) -> tuple[int | str, str]:
    argv = list(args)
    if data is not None:
        path = tmp_path / "w.json"
        path.write_bytes(data)
        argv.insert(1, str(path))
    t0 = time.perf_counter()
    try:
        rc = sim_main(argv)
    except SystemExit as e:
        rc = e.code
    assert time.perf_counter() - t0 < 10
    return rc, capsys.readouterr().out


@pytest.mark.parametrize("data,expected", [
    (b"[" * 100_000 + b"]" * 100_000, "100,000 levels deep"),
    (workload_bytes({**ONE, "arrival_time": math.nan}), "arrival_time of request r7 is NaN"),
    (workload_bytes({**ONE, "arrival_time": 1e18}), "arrival times must be finite numbers from 0 to 1e+12"),
    (workload_bytes({**ONE, "arrival_step": 1e18}), "arrival steps must be whole numbers from 0 to 1,000,000"),
    (workload_bytes({**ONE, "prompt_len": 1e300}), "prompt_len of request r7 is 1e+300"),
])
@pytest.mark.parametrize("command", ["run", "trace"])
def test_cli_refuses_a_hostile_workload_in_one_line(tmp_path, capsys, command, data, expected):
    rc, out = cli(tmp_path, capsys, data, command)
    assert isinstance(rc, str) and rc.startswith("cannot read workload") and expected in rc, rc
    one_short_line(rc.split(": ", 1)[1])   # after "cannot read workload PATH: "
    assert out == ""


@pytest.mark.parametrize("config,expected", [
    ('{"watermark": NaN}', "--config: config watermark is NaN"),
    ("[1", "--config: it is not valid JSON"),
    ("[1, 2]", "--config: it must be a JSON object"),
    ('{"policy": "nope"}', "unknown policy 'nope'"),
    ('{"max_num_seqs": 1e300}', "max_num_seqs must be a whole number"),
    ("[" * 10_000 + "]" * 10_000, "levels deep"),
])
def test_cli_refuses_a_hostile_config(tmp_path, capsys, config, expected):
    rc, _ = cli(tmp_path, capsys, workload_bytes(ONE), "run", "--config", config)
    assert isinstance(rc, str) and expected in rc, rc
    one_short_line(rc)


def test_cli_run_prints_strict_json_and_saves_a_strict_trace(tmp_path, capsys):
    # one tenant: the fairness metrics cannot be said (NaN in summary), and must print as null
    out_trace = tmp_path / "run.trace"
    rc, out = cli(tmp_path, capsys, workload_bytes(ONE), "run", "-o", str(out_trace))
    assert rc == 0
    m = strict_loads(out)
    assert m["jain_index"] is None and m["max_service_gap"] is None and m["requests"] == 1
    strict_loads(gzip.decompress(out_trace.read_bytes()).decode())


def test_cli_trace_is_strict_json(tmp_path, capsys):
    rc, out = cli(tmp_path, capsys, workload_bytes(ONE, {**ONE, "id": "b", "arrival_time": 3.5}), "trace")
    assert rc == 0 and [strict_loads(line) for line in out.splitlines()]


def test_cli_llamalog_json_is_strict(tmp_path, capsys):
    log = next((ROOT / "tests" / "fixtures" / "llama-logs").glob("*/*.log"))
    rc, out = cli(tmp_path, capsys, None, "llamalog", str(log), "--json")
    assert rc == 0 and strict_loads(out)
    rc, out = cli(tmp_path, capsys, None, "llamalog", str(log), "--resim", "--json")
    assert rc == 0 and strict_loads(out)


def test_cli_vllm_json_and_files_are_strict(tmp_path, capsys):
    rec = ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"
    oracle, wl = tmp_path / "o.jsonl", tmp_path / "w.json"
    rc, out = cli(tmp_path, capsys, None, "vllm", str(rec), "--json", "--oracle-jsonl", str(oracle),
                  "--workload", str(wl))
    assert rc == 0 and strict_loads(out)
    assert [strict_loads(x) for x in oracle.read_text().splitlines()] and strict_loads(wl.read_text())


# --------------------------------------------------------------------------------------------
# Strict JSON out
# --------------------------------------------------------------------------------------------

def test_dumps_strict_writes_null_for_nan_and_infinities():
    doc = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": np.float64("nan"), "d": np.float32(2.0),
           "e": np.int64(3), "f": np.array([1.0, np.nan]), "g": (np.bool_(True), None)}
    text = dumps_strict(doc, sort_keys=True)
    assert strict_loads(text) == {"a": None, "b": [None, None, 1.5], "c": None, "d": 2.0, "e": 3,
                                  "f": [1.0, None], "g": [True, None]}
    assert finite([math.nan, {"x": math.inf}]) == [None, {"x": None}]


def test_dumps_strict_is_plain_json_dumps_when_all_is_finite():
    doc = {"x": [1, 2.5, "s", None, True], "y": {"z": 1e300}}
    assert dumps_strict(doc, indent=1) == json.dumps(doc, indent=1)


def test_trace_file_is_strict_even_with_nan_and_inf_in_meta():
    tr = simulate(scenarios.workload("lesson_abc"))
    tr.meta["fit"] = {"r2": math.nan, "limit": math.inf}
    doc = strict_loads(gzip.decompress(tr.to_bytes()).decode())
    assert doc["meta"]["fit"] == {"r2": None, "limit": None}
    assert Trace.from_bytes(tr.to_bytes()).meta["fit"]["r2"] is None


def test_workload_and_oracle_lines_are_strict():
    wl = Workload.from_json(json.loads(workload_bytes(ONE, {**ONE, "id": "t", "arrival_time": 0.25})))
    strict_loads(wl.dumps())
    for line in oracle_jsonl(wl).splitlines():
        strict_loads(line)


# --------------------------------------------------------------------------------------------
# Trace files from elsewhere
# --------------------------------------------------------------------------------------------

def _trace_doc(**change) -> bytes:
    doc = json.loads(gzip.decompress(simulate(scenarios.workload("lesson_abc")).to_bytes()))
    doc.update(change)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("data,expected", [
    (b"[" * 100_000 + b"]" * 100_000, "too deep"),
    (b"\x1f\x8b\x08\x00garbage", "not a trace file"),
    (_trace_doc(version="2"), "'version' is not a whole number"),
    (_trace_doc(version=99), "newer than this program"),
    (_trace_doc(tables=[1, 2]), "'tables' and 'meta' must be JSON objects"),
    (_trace_doc(meta="x"), "'tables' and 'meta' must be JSON objects"),
    (_trace_doc(tables={"steps": {"columns": ["step"], "dtypes": ["int64"], "data": [["x", "y"]]}}),
     "a table does not have the layout"),
    (_trace_doc(tables={"requests": {"columns": 5}}), "a table does not have the layout"),
])
def test_a_damaged_trace_file_is_a_plain_value_error(data, expected):
    with pytest.raises(ValueError, match=expected) as e:
        Trace.from_bytes(data)
    one_short_line(str(e.value))


def test_a_trace_zip_bomb_stops_at_the_limit(monkeypatch):
    monkeypatch.setattr("sim.trace.MAX_TRACE_UNZIPPED", 1 << 20)
    bomb = gzip.compress(b" " * (8 << 20))
    with pytest.raises(ValueError, match="unzips to more than"):
        Trace.from_bytes(bomb)


# --------------------------------------------------------------------------------------------
# Fairness metrics with many tenants (they compare every pair)
# --------------------------------------------------------------------------------------------

def _service_gap_by_steps(trace) -> float:
    """The definition, step by step: per pair and per interval both are backlogged, the running
    service difference's farthest move from its value when the interval began."""
    svc, bl = metrics.tenant_service(trace), metrics.backlogged(trace)
    names = [t for t in svc.columns if t in bl.columns]
    worst = 0.0
    for i, a in enumerate(names):
        for c in names[i + 1:]:
            both = (bl[a] & bl[c]).to_numpy()
            diff = (svc[a] - svc[c]).to_numpy()
            start = None
            for k in range(len(both)):
                if not both[k]:
                    start = None
                    continue
                if start is None:
                    start = diff[k - 1] if k else 0.0
                worst = max(worst, abs(diff[k] - start))
    return worst


@pytest.mark.parametrize("seed", range(8))
def test_max_service_gap_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    n, tenants = int(rng.integers(4, 30)), int(rng.integers(2, 6))
    reqs = [{"id": f"r{i}", "prompt_len": int(rng.integers(1, 150)), "max_tokens": int(rng.integers(1, 30)),
             "arrival_step": int(rng.integers(0, 40)), "tenant": f"t{rng.integers(0, tenants)}"} for i in range(n)]
    cfg = {"max_num_seqs": int(rng.integers(1, 4)), "max_num_batched_tokens": 64, "policy": ("fcfs", "vtc")[seed % 2]}
    tr = simulate(Workload.from_json({"requests": reqs, "config": cfg}))
    assert metrics.max_service_gap(tr) == pytest.approx(_service_gap_by_steps(tr), abs=1e-9)


def test_summary_with_many_tenants_takes_seconds_not_minutes():
    reqs = [{"id": f"r{i}", "prompt_len": 10, "max_tokens": 10, "arrival_step": i, "tenant": f"t{i}"}
            for i in range(limits.MAX_TENANTS)]
    tr = simulate(Workload.from_json({"requests": reqs}))
    t0 = time.perf_counter()
    metrics.summary(tr)
    assert time.perf_counter() - t0 < 5   # a Python loop per step and pair took 34 s for 300 tenants


# --------------------------------------------------------------------------------------------
# Settings files and text fields
# --------------------------------------------------------------------------------------------

def test_settings_file_with_nan_or_a_giant_number_is_plain():
    from ui.state import Setting, parse_settings_json
    settings = [Setting("keep_rate", 1.0, float, bounds=(0.0, 10.0)), Setting("keep_n", 2, int, bounds=(1, 9))]
    nan = b'{"format": "scheduler-lab-settings", "page": "t", "settings": {"rate": NaN}}'
    with pytest.raises(ValueError, match="rate must be a number, not NaN"):
        parse_settings_json(nan, "t", settings)
    big = b'{"format": "scheduler-lab-settings", "page": "t", "settings": {"n": ' + b"9" * 4000 + b"}}"
    with pytest.raises(ValueError) as e:
        parse_settings_json(big, "t", settings)
    assert len(str(e.value)) < 120, str(e.value)


def test_lesson_text_fields_never_print_a_giant_number():
    from sim.lessons.starvation import parse_jobs
    from sim.lessons.sweeps import parse_int_list
    with pytest.raises(ValueError) as e:
        parse_int_list("9" * 500, "output length", 1, 100)
    assert "500-digit" not in str(e.value) and len(str(e.value)) < 120
    with pytest.raises(ValueError) as e:
        parse_jobs("a, 0, " + "9" * 400)
    assert len(str(e.value)) < 120, str(e.value)


# --------------------------------------------------------------------------------------------
# Recordings and logs from elsewhere (made from the bundled samples)
# --------------------------------------------------------------------------------------------

VLLM_SAMPLE = ROOT / "samples" / "vllm" / "fcfs_kv_pressure.jsonl.gz"


def _recording_lines() -> list[dict]:
    return [json.loads(x) for x in gzip.decompress(VLLM_SAMPLE.read_bytes()).splitlines()]


@pytest.mark.parametrize("key,value,expected", [
    ("block_size", 0, "config block_size must be a whole number from 1"),
    ("num_gpu_blocks", "x", "num_gpu_blocks must be a whole number"),
    ("watermark", math.inf, "config watermark is infinite"),
    ("max_num_batched_tokens", 2.5, "max_num_batched_tokens must be a whole number"),
    ("policy", [], "config policy is a list"),
    ("max_model_len", 1e300, "config max_model_len is 1e+300"),
])
def test_a_recording_whose_header_settings_are_damaged_is_refused(key, value, expected):
    from servers.vllm.recording import read_recording
    lines = _recording_lines()
    lines[0]["config"][key] = value
    with pytest.raises(ValueError, match="the recording's header is damaged") as e:
        read_recording("\n".join(json.dumps(x) for x in lines).encode())
    assert expected in str(e.value)
    one_short_line(str(e.value))


def test_a_recording_with_absurd_numbers_in_its_lines_skips_them_and_says_so():
    from servers.vllm.compare import decisions
    from servers.vllm.recording import read_recording, to_trace
    lines = _recording_lines()
    steps = [i for i, x in enumerate(lines) if x.get("kind") == "step"]
    lines[steps[3]]["free"] = 10**30           # used to come out as a garbage int64 (a float cast)
    lines[steps[4]]["waiting_n"] = None        # used to raise TypeError in to_trace
    lines[steps[5]]["blocks"] = [[0, [1e300]]]
    rec = read_recording("\n".join(json.dumps(x) for x in lines).encode())
    assert any("damaged" in w for w in rec.warnings), rec.warnings
    tr = to_trace(rec)
    assert tr.steps["free_blocks"].max() <= rec.header["config"]["num_gpu_blocks"]
    decisions(rec)
    strict_loads(dumps_strict(metrics.summary(tr)))


@pytest.mark.parametrize("data", [
    bytes(range(256)) * 4096,                   # 1 MB of every byte value
    b"a" * (16 << 20),                          # one 16 MB line
    b"\x1f\x8b" + b"\x00" * 1000,               # gzip magic, then nothing gzip
    gzip.compress(b"\x00" * (64 << 20)),        # 64 MB of zeros, gzipped to 64 KB
], ids=["binary", "one huge line", "fake gzip", "zeros bomb"])
def test_the_llama_log_reader_reads_anything_without_raising(data):
    from servers.llama_server import read_llama_log, summary
    t0 = time.perf_counter()
    tr = read_llama_log(data)
    assert time.perf_counter() - t0 < 20
    assert len(tr.steps) == 0
    strict_loads(dumps_strict(summary(tr)))


@pytest.mark.parametrize("as_path", [False, True], ids=["bytes", "path"])
def test_a_gzip_bomb_of_a_llama_log_stops_at_the_unzip_limit(monkeypatch, tmp_path, as_path):
    from servers.llama_server import read_llama_log
    monkeypatch.setattr("servers.llama_server.reader.MAX_UNZIPPED_BYTES", 4 << 20)
    bomb = gzip.compress(b"\n" * (64 << 20), compresslevel=1)   # 64 MB of empty lines in 300 KB
    source = bomb
    if as_path:
        source = tmp_path / "bomb.log.gz"
        source.write_bytes(bomb)
    t0 = time.perf_counter()
    tr = read_llama_log(source)
    assert time.perf_counter() - t0 < 2   # all of it: about 3 s here
    assert any("only its first" in w for w in tr.meta["warnings"]), tr.meta["warnings"]


def test_cli_says_plainly_when_it_cannot_read_or_write(tmp_path, capsys):
    rc, _ = cli(tmp_path, capsys, workload_bytes(ONE), "run", "-o", str(tmp_path / "no" / "such" / "x.trace"))
    assert rc == f"cannot write {tmp_path / 'no' / 'such' / 'x.trace'}: No such file or directory"
    rc, _ = cli(tmp_path, capsys, None, "run", str(tmp_path))
    assert rc == f"cannot read workload {tmp_path}: Is a directory"


@pytest.mark.parametrize("body,limit,words", [
    (b"\n" * (1 << 20), ("MAX_BAD_LINES", 1000), "over 1,000 lines are not JSON objects"),
    (b'{"kind": "noise"}\n' * 5000, ("MAX_BAD_LINES", 1000), "over 1,000 lines are not JSON objects"),
    (b"a" * (4 << 20), ("MAX_LINE_BYTES", 1 << 20), "a line is over 1 MiB"),
    (b'{"kind": "end"}\n' * 200_000, ("MAX_TEXT_BYTES", 1 << 20), "only its first"),
], ids=["blank lines", "foreign lines", "an endless line", "too much text"])
def test_a_recording_of_junk_stops_reading_and_says_so(monkeypatch, body, limit, words):
    from servers.vllm.recording import read_recording
    monkeypatch.setattr(f"servers.vllm.recording.{limit[0]}", limit[1])
    header = gzip.decompress(VLLM_SAMPLE.read_bytes()).split(b"\n")[0]
    t0 = time.perf_counter()
    rec = read_recording(gzip.compress(header + b"\n" + body, compresslevel=1))
    assert time.perf_counter() - t0 < 3
    assert any(words in w for w in rec.warnings), rec.warnings


def _archives(inner: bytes) -> dict:
    """`inner` (a file) inside the archives and compressors people send instead of it."""
    import bz2
    import io
    import lzma
    import tarfile
    import zipfile
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as f:
        f.writestr("rec.jsonl", inner)
    t = io.BytesIO()
    with tarfile.open(fileobj=t, mode="w:gz") as f:
        info = tarfile.TarInfo("rec.jsonl")
        info.size = len(inner)
        f.addfile(info, io.BytesIO(inner))
    return {"a zip archive": z.getvalue(), "a tar archive": t.getvalue(), "a bzip2 file": bz2.compress(inner),
            "an xz file": lzma.compress(inner)}


@pytest.mark.parametrize("kind", ["a zip archive", "a tar archive", "a bzip2 file", "an xz file"])
def test_an_archive_is_named_and_the_user_told_to_unpack_it(kind, tmp_path, capsys):
    """A zip or a .tar.gz of a recording, a workload or a log was "a binary file", or (a tar.gz,
    whose header gunzips to text) a CSV whose columns were the tar header's bytes; `sim llamalog`
    read it as a log of nothing and exited 0. Each reader now names the archive."""
    from servers.server_log.detect import detect_text
    from servers.vllm.recording import read_recording
    want = f"it is {kind} (unpack it and give the file inside)"
    rec = gzip.decompress(VLLM_SAMPLE.read_bytes())
    data = _archives(rec)[kind]
    with pytest.raises(ValueError) as e:
        read_recording(data)
    assert str(e.value) == f"this is not a vLLM step recording: {want}"
    wl = _archives(scenarios.SCENARIOS[scenarios.DEFAULT_SCENARIO].workload().dumps().encode())[kind]
    with pytest.raises(ValueError) as e:
        parse_workload(wl)
    assert str(e.value).startswith(f"{want}; expected a workload JSON")
    log = _archives(b"srv  update_slots: all slots are idle\n" * 50)[kind]
    if kind == "a tar archive":   # a tar's text is its files' own: it reads as the log it holds
        assert detect_text(gzip.decompress(log)).engine == "llama-server"
        return
    assert detect_text(log).reason == want
    p = tmp_path / "server.log"
    p.write_bytes(log)
    with pytest.raises(SystemExit) as e:
        sim_main(["llamalog", str(p)])
    assert str(e.value) == f"{p}: not a llama-server log: {want}"
