"""SGLang 0.5.2x's scheduler lines (sglang 0.5.23's wheel: srt/managers/scheduler_components/
metrics_reporter.py:753-802 and :963-1068, pool_stats_observer.py:104-148, scheduler.py:4525-4537),
each form read as one batch: the forward iteration after the head (`Prefill batch [N],`, with
SGLANG_LOG_FORWARD_ITERS), #replay-token, the hierarchical sparse KV pool's `#gpu token` / `gpu
token usage` / `#cpu token` / `cpu token usage`, `cpu graph` / `musa graph`, `cap len`, `block accept
len`, `#optimistic-req`, `#host-receive-req`, `waiting-image-req`, the MFU estimates and forward
occupancy (kept under `other`), and a retraction line with `#mamba_num_gained`.

Before, `Prefill batch [N],` matched no head, `Decode batch [N],` matched only as a bare decode line
with no rank, which made the rankless lane the leader: every later `TP0` line was dropped as
another rank's, and none was counted as not understood."""
from __future__ import annotations

from servers.server_log import read_log
from servers.server_log.detect import detect_text

P = "[2026-11-20 10:00:0{s} TP0] "
LINES = [
    P.format(s=1) + "Prefill batch [1042], #new-seq: 2, #new-token: 1024, #cached-token: 256, token usage: 0.12, "
    "#running-req: 5, #queue-req: 3, #pending-token: 0, cuda graph: False, input throughput (token/s): 8123.45",
    P.format(s=1) + "Decode batch [1043], #running-req: 7, #token: 5312, token usage: 0.13, cuda graph: True, "
    "gen throughput (token/s): 412.50, #queue-req: 3",
    P.format(s=2) + "Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.15, "
    "#running-req: 7, #queue-req: 2, #pending-token: 128, #replay-token: 64, cuda graph: False, input throughput "
    "(token/s): 5120.00, est. prefill TFLOPS/s (per GPU): 12.34, fwd occupancy: 81.20%, fwd+idle occupancy: 95.00%",
    P.format(s=2) + "Decode batch, #running-req: 8, #gpu token: 4096, gpu token usage: 0.20, #cpu token: 1024, "
    "cpu token usage: 0.05, cuda graph: True, gen throughput (token/s): 450.00, #queue-req: 2, est. decode "
    "TFLOPS/s (per GPU): 3.21, est. read BW (GB/s per GPU): 1500.00, est. write BW (GB/s per GPU): 12.50",
    P.format(s=3) + "Prefill batch, #new-seq: 1, #new-token: 100, #cached-token: 0, token usage: 0.15, "
    "#running-req: 8, #queue-req: 1, #pending-token: 0, #bootstrap-req: 2, #inflight-req: 1, #optimistic-req: 0, "
    "waiting-image-req: 3, cpu graph: False, input throughput (token/s): 100.00",
    P.format(s=3) + "Decode batch, #running-req: 8, #token: 5400, token usage: 0.14, accept len: 2.31, accept rate: "
    "0.66, cap len: 3.00, block accept len: 2.10, pre-allocated usage: 0.02, #prealloc-req: 1, #transfer-req: 0, "
    "#host-receive-req: 0, #retracted-req: 0, musa graph: True, gen throughput (token/s): 300.00, #queue-req: 0",
    P.format(s=4) + "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 512, "
    "#mamba_num_gained: 3, #new_token_ratio: 0.7000 -> 0.8500",
]


def test_every_0_5_2x_form_is_one_batch_of_its_rank():
    heads = [x for x in LINES if "batch [" in x]   # recognised as SGLang by those alone too
    assert detect_text(("\n".join(heads) + "\n").encode()).engine == "sglang"
    log = read_log(("\n".join(LINES) + "\n").encode(), "sglang.log")
    r = log.read
    assert r.engine == "sglang" and r.not_understood == 0 and r.duplicates == 0
    assert [(b["kind"], b["lane"], b["ranks"]) for b in r.batches] == [(k, "", "TP0") for k in ["prefill", "decode"] * 3]
    assert [b.get("forward_iter") for b in r.batches] == [1042, 1043, None, None, None, None]
    pre, dec, pre2, hisparse, pd_pre, spec = r.batches
    assert (pre["new_tokens"], pre["cached_tokens"], pre["running"], pre["waiting"]) == (1024, 256, 5, 3)
    assert pre2["replay_tokens"] == 64 and pre2["other"]["fwd_occupancy"] == 0.812
    assert (hisparse["gpu_kv_tokens"], hisparse["cpu_kv_usage"], hisparse["kv_usage"]) == (4096, 0.05, 0.2)
    assert pd_pre["optimistic_req"] == 0 and pd_pre["waiting_image_req"] == 3 and pd_pre["cpu_graph"] is False
    assert (spec["cap_len"], spec["block_accept_len"], spec["host_receive_req"], spec["musa_graph"]) == (3.0, 2.1, 0, True)
    assert len(log.trace.steps) == 6
    (x,) = r.extra["retractions"]
    assert (x["retracted"], x["new_tokens_gained"], x["mamba_num_gained"], x["new_token_ratio"]) == (2, 512, 3, [0.7, 0.85])


def test_the_request_logger_s_json_lines_give_arrivals_and_finishes():
    """`--log-requests-format json` in 0.5.x (utils/request_logger.py, log_utils.py log_json): the
    request logger's own `[date time] ` before the object, and an event naming the line. Both were
    dropped (a JSON request line had to start with `{`); now a received line is an arrival and a
    finished one a finish with its meta_info, as the text form's `Receive:` / `Finish:` are."""
    lines = [
        '[2026-11-20 10:00:01] {"timestamp": "2026-11-20T10:00:01.123456", "event": "request.received", '
        '"rid": "abc123", "obj": {"rid": "abc123", "sampling_params": {"max_new_tokens": 64}}}',
        LINES[0],
        '[2026-11-20 10:00:03] {"timestamp": "2026-11-20T10:00:03.223456", "event": "request.finished", '
        '"rid": "abc123", "obj": {"rid": "abc123"}, "out": {"meta_info": {"id": "abc123", "prompt_tokens": 100, '
        '"completion_tokens": 64, "cached_tokens": 0, "e2e_latency": 2.1}}}',
    ]
    log = read_log(("\n".join(lines) + "\n").encode(), "sglang.log")
    assert [q["kind"] for q in log.read.requests] == ["receive", "finish"] and log.read.other_lines == 0
    (row,) = log.trace.requests.to_dict("records")
    assert (row["request"], row["arrival_time"], row["finish_time"], row["prompt_len"], row["output_tokens"]) == \
        ("abc123", 0.0, 2.0, 100, 64)
