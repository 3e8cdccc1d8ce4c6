"""The engine's Trace: the simulator's schema with measured times, the phase split, the KV log;
EOS, admission control, sampling seeds, device choices."""
import pytest
import torch

from engine import EngineConfig, LLMEngine, SamplingParams
from engine.config import ModelConfig
from engine.device import resolve_device, resolve_dtype, setup_threads
from engine.engine import PHASE_COLUMNS
from engine.weights import build_model
from sim.metrics import summary
from sim.trace import SCHEMA, Trace
from sim.workload import Request, Workload, generate

SMALL = ModelConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                    num_kv_heads=2, head_dim=16, max_position_embeddings=1024)


@pytest.fixture(scope="module")
def engine():
    return LLMEngine(EngineConfig(), model=build_model(SMALL, seed=3))


@pytest.fixture(scope="module")
def run(engine):
    wl = generate(12, seed=4, arrival="fixed", every=3, prompt={"dist": "uniform", "low": 5, "high": 70},
                  output={"dist": "uniform", "low": 2, "high": 30})
    return engine.run(wl, {"num_gpu_blocks": 14, "max_num_batched_tokens": 32})


def test_trace_has_the_schema_measured_times_and_phases(run):
    t = run.trace
    assert t.source == "engine" and t.time_unit == "ms" and t.meta["device"] == "cpu"
    assert t.meta["dtype"] == "float32" and t.meta["model"]["hidden_size"] == 64
    for name, cols in SCHEMA.items():
        assert set(cols) <= set(getattr(t, name).columns), name
    s = t.steps
    assert set(PHASE_COLUMNS) <= set(s.columns)
    busy = s[~s["idle"]]
    assert (busy["end"] > busy["start"]).all()
    assert (s["start"].to_numpy()[1:] >= s["end"].to_numpy()[:-1]).all()  # steps do not overlap
    assert (busy["t_forward"] > 0).all()
    phases = busy[[c for c in PHASE_COLUMNS if c != "cpu_ms"]].sum(axis=1)
    assert (phases <= (busy["end"] - busy["start"]) + 1e-6).all()
    assert t.requests["preemptions"].sum() > 0  # the pool is small on purpose
    assert (t.requests["finish_reason"] == "length").all()


def test_trace_round_trip_and_block_map(run):
    t = run.trace
    back = Trace.from_bytes(t.to_bytes())
    assert back.steps["t_forward"].tolist() == pytest.approx(t.steps["t_forward"].tolist())
    assert back.meta["source"] == "engine"
    count, _, _ = t.block_map(t.num_steps)
    assert count.sum() == 0  # every block is free at the end
    mid = t.num_steps // 2
    assert t.block_map(mid)[0].sum() > 0
    assert summary(t)  # the metrics read an engine trace like any other


def test_idle_steps_before_the_first_arrival(engine):
    res = engine.run(Workload([Request("late", 8, 3, arrival_step=3)]))
    s = res.trace.steps
    assert s["idle"].tolist()[:3] == [True, True, True] and not s["idle"].iloc[3]
    assert res.trace.requests["arrival_step"].iloc[0] == 3


def test_eos_stops_a_request_unless_ignored():
    wl = Workload([Request("a", 12, 20, prompt_token_ids=tuple(range(40, 52)))])
    free = LLMEngine(EngineConfig(), model=build_model(SMALL, seed=3)).run(wl).tokens["a"]
    eos = free[4]
    first = free.index(eos)
    stop_model = build_model(ModelConfig(**{**SMALL.to_dict(), "eos_token_id": eos}), seed=3)
    res = LLMEngine(EngineConfig(), model=stop_model).run(wl)
    assert res.tokens["a"] == free[:first + 1] and res.finish_reason["a"] == "stop"
    assert res.trace.requests["finish_reason"].iloc[0] == "stop"
    assert res.trace.block_map(res.trace.num_steps)[0].sum() == 0
    ignored = LLMEngine(EngineConfig(ignore_eos=True), model=stop_model).run(wl).tokens["a"]
    assert ignored == free


def test_admission_control_rejects(engine):
    wl = Workload([Request(f"q{i}", 30, 5) for i in range(6)])
    res = engine.run(wl, {"max_queued_requests": 2, "max_num_seqs": 1})
    assert res.trace.requests["rejected"].sum() > 0
    assert all(res.finish_reason[r] == "rejected" for r in res.trace.requests.query("rejected")["request"])


def test_seeded_sampling_is_reproducible(engine):
    wl = Workload([Request("s", 10, 12, prompt_token_ids=tuple(range(10)))])
    runs = [engine.run(wl, sampling={"s": SamplingParams(temperature=1.0, seed=seed)}).tokens["s"]
            for seed in (5, 5, 6)]
    assert runs[0] == runs[1] != runs[2]


def test_a_request_that_cannot_fit_is_refused(engine):
    engine.reset({"num_gpu_blocks": 4, "block_size": 16}, max_model_len=512)
    with pytest.raises(ValueError, match="KV blocks"):
        engine.add_request(Request("big", 60, 10))
    with pytest.raises(ValueError, match="max_model_len"):
        engine.add_request(Request("long", 500, 100))


def test_device_and_dtype_choice():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError):
        resolve_dtype("int3", torch.device("cpu"))
    n = torch.get_num_threads()
    try:
        assert setup_threads(1) == 1
    finally:
        torch.set_num_threads(n)


def test_bf16_runs_on_cpu():
    eng = LLMEngine(EngineConfig(dtype="bf16"), model=build_model(SMALL, seed=3, dtype=torch.bfloat16))
    res = eng.run(Workload([Request("h", 20, 6)]))
    assert len(res.tokens["h"]) == 6 and res.trace.meta["dtype"] == "bfloat16"


def test_slo_admission_on_the_engine_prices_the_queue_with_its_measured_steps(engine):
    # warm-up arrivals one per step (the cost model measures them), then a burst the budget cannot
    # serve in time: its first requests can meet the TTFT target, its last cannot
    warm = [Request(f"w{i}", 24, 4, arrival_step=i) for i in range(12)]
    burst = [Request(f"b{i:02d}", 40, 3, arrival_step=30) for i in range(30)]
    wl = Workload(warm + burst)
    base = {"max_num_seqs": 2, "max_num_batched_tokens": 32, "num_gpu_blocks": 64}
    plain = engine.run(wl, base).trace.steps
    busy = plain[~plain["idle"]]
    step_ms = float((busy["end"] - busy["start"]).median())
    # ~4 steps for the first of the burst, ~37 ahead of the last; a lone warm-up request needs
    # one or two. 18 steps leaves room for this shared machine's step times to swing 2x either way
    # between the two runs (12 was once too few: at load 9 the warm-ups' last three were priced out)
    target = 18 * step_ms
    res = engine.run(wl, {**base, "slo": {"ttft": target}, "slo_admission": "reject"})
    r = res.trace.requests.set_index("request")
    fit = res.trace.meta["cost_model"]
    assert fit["name"] == "measured" and fit["ready"] and fit["steps"] >= 8 and fit["time_unit"] == "ms"
    assert not r.loc[[q.id for q in warm], "rejected"].any()   # each alone in the queue: in time
    rejected = r.loc[[q.id for q in burst], "rejected"].to_numpy()
    assert not rejected[:2].any() and rejected[-5:].all()
    assert all(res.finish_reason[q] == "rejected" for q in r.index[r["rejected"]])


def test_measured_cost_fits_steps_as_they_come():
    from sim.cost import MeasuredCost
    c = MeasuredCost("ms", min_steps=3)
    c.observe(100, 0, 999.0)   # the first step (warm-up) is left out
    assert not c.ready and c.step_time_totals(10, 10) == 0.0
    for n, ctx in [(10, 100), (50, 20), (30, 400), (5, 5)]:
        c.observe(n, ctx, 0.02 * n + 0.001 * ctx + 1.5)
    assert c.ready and c.n == 4
    assert c.step_time_totals(40, 200) == pytest.approx(0.02 * 40 + 0.001 * 200 + 1.5)
    d = c.describe()
    assert d["per_token"] == pytest.approx(0.02) and d["per_step"] == pytest.approx(1.5)
    neg = MeasuredCost("ms", min_steps=1, skip_first=0)
    for n in (1, 2, 3, 4):
        neg.observe(n, 0, 10.0 - n)   # time falling with tokens: pinned at zero per token, not negative
    assert (neg.coefficients() >= 0).all()


def test_async_scheduling_is_refused_not_run_sync(engine):
    """The engine applies each step's output before the next schedule(): a config asking for
    vLLM's async scheduling is refused in one sentence, by reset and by run alike."""
    says = r"^the live engine runs sync scheduling only: set async_scheduling to false \([^()]*\)$"
    with pytest.raises(ValueError, match=says):
        engine.reset({"num_gpu_blocks": 14, "async_scheduling": True})
    wl = Workload([Request("a", 8, 3)], {"num_gpu_blocks": 14, "async_scheduling": True})
    with pytest.raises(ValueError, match=says):
        engine.run(wl)
    assert engine.run(wl, {"async_scheduling": False}).trace.requests.shape[0] == 1   # the engine still runs
