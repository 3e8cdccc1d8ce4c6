"""llama-server slot scheduling: decode tokens first, prompt chunks up to n_batch, -nocb."""
from sim.simulate import simulate
from sim.workload import Request, Workload


def run(reqs, **cfg):
    base = {"scheduler": "llama_slots", "max_num_seqs": 2, "max_num_batched_tokens": 256}
    base.update(cfg)
    return simulate(Workload(reqs, config=base))


def test_long_prompt_chunks_beside_one_decode():
    """The lesson's Example 11 pattern: -b 256, a 2,400-token prompt joins a generating slot:
    9 chunks of 255 beside one decode token, then the last 105."""
    tr = run([Request("chat", 10, 40), Request("long", 2400, 3, arrival_step=3)])
    long = tr.batch[(tr.batch["request"] == "long") & (tr.batch["kind"] == "prefill")]
    assert list(long["tokens"]) == [255] * 9 + [105]
    steps = tr.steps.set_index("step")
    for s in long["step"]:
        assert steps.loc[s, "decode_tokens"] == 1
        assert steps.loc[s, "num_tokens"] <= 256
    assert bool(long["sampled"].iloc[-1]) and not long["sampled"].iloc[:-1].any()


def test_no_cont_batching_holds_prompts_while_generating():
    tr = run([Request("a", 10, 20), Request("b", 50, 5, arrival_step=2)], cont_batching=False)
    b = tr.batch
    first_b = int(b[b["request"] == "b"]["step"].min())
    a_finish = int(tr.requests.set_index("request").loc["a", "finish_step"])
    assert first_b == a_finish + 1  # b's prompt waits until a stops generating
    tr_cb = run([Request("a", 10, 20), Request("b", 50, 5, arrival_step=2)])
    assert int(tr_cb.batch[tr_cb.batch["request"] == "b"]["step"].min()) == 3


def test_slots_fixed_and_no_preemption():
    reqs = [Request(f"r{i}", 30 + i, 8, arrival_step=i) for i in range(7)]
    tr = run(reqs, max_num_seqs=3, max_num_batched_tokens=64, num_gpu_blocks=200)
    assert set(tr.batch["slot"].unique()) <= {0, 1, 2}
    assert int(tr.requests["preemptions"].sum()) == 0
    assert (tr.requests["output_tokens"] == 8).all()
    assert (tr.steps["num_tokens"] <= 64).all()
    per_step = tr.batch.groupby("step")["slot"].agg(lambda s: s.duplicated().any())
    assert not per_step.any()


def test_prompt_cache_reuses_slot_prefix():
    common = tuple(range(100, 164))
    a = Request("a", 64, 4, prompt_token_ids=common)
    b = Request("b", 80, 4, arrival_step=10, prompt_token_ids=common + tuple(range(500, 516)))
    tr = run([a, b], max_num_seqs=2, enable_prefix_caching=True)
    req = tr.requests.set_index("request")
    assert int(req.loc["b", "cached_tokens"]) == 64
    first = tr.batch[tr.batch["request"] == "b"].iloc[0]
    assert int(first["tokens"]) == 16 and int(first["slot"]) == int(req.loc["a", "slot"])
