"""Every wrapper users' logs come under, generated from the real excerpts (engine_variants.py):
the same records come out as from the plain excerpt; the wrapper is named in the verdict."""
from __future__ import annotations

import gzip

import pytest

from engine_variants import ALL, SGLANG, VLLM, WRAPPERS, gz, lines, variant
from servers.server_log import read_log

DROP = ("line", "repeated")


def records(r):
    rows = r.batches if r.engine == "sglang" else r.stats
    return [{k: v for k, v in x.items() if k not in DROP and k != "time"} for x in rows]


def requests(r):
    return [{k: v for k, v in x.items() if k not in ("line", "time", "t")} for x in r.requests]


@pytest.mark.parametrize("wrapper", WRAPPERS, ids=lambda w: w.__name__)
@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_a_wrapped_excerpt_reads_to_the_same_records(path, wrapper):
    plain = read_log(path.read_bytes(), path.name).read
    data = variant(path, wrapper)
    got = read_log(data, "anything.txt").read
    assert got.engine == plain.engine
    assert records(got) == records(plain)
    assert got.not_understood == 0, got.not_understood_examples
    assert requests(got) == requests(plain)
    if wrapper.__name__.startswith("hard_wrap") and any(len(x) > int(wrapper.__name__[-3:].strip("_"))
                                                      for x in lines(path) if "batch" in x or "throughput" in x):
        assert got.rejoined > 0 and "terminal hard wrap (lines rejoined)" in got.wrappers
    names = {"docker": "docker/kubectl --timestamps (RFC 3339)", "kubectl": "docker/kubectl --timestamps (RFC 3339)",
             "journald": "journald", "ray": "Ray / SkyPilot (pid=N)", "ray_repeated": "Ray [repeated Nx across cluster]",
             "ansi": "ANSI colour codes", "ansi_residue": "ANSI colour codes", "tqdm_glued": "tqdm bar glued before a line"}
    if wrapper.__name__ in names and (plain.batches or plain.stats):
        assert names[wrapper.__name__] in got.wrappers


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_gzip_whatever_the_name_reads_the_same(path):
    plain = read_log(path.read_bytes()).read
    got = read_log(gz(path.read_bytes()), "log.txt").read
    assert got.to_json() | {"file": "", "bytes_read": 0} == plain.to_json() | {"file": "", "bytes_read": 0}


def test_docker_gives_vllm_its_year():
    path = next(p for p in VLLM if p.name.startswith("06_"))
    got = read_log(variant(path, WRAPPERS[0])).read
    assert got.time_origin.startswith("2025-11-18") and "year" not in " ".join(got.cannot_say)


def test_ray_repeated_is_kept_once_with_its_count():
    path = next(p for p in SGLANG if p.name.startswith("26_"))
    got = read_log(variant(path, WRAPPERS[4])).read
    assert [b.get("repeated", 1) for b in got.batches][:4] == [1, 3, 1, 5]


def test_cut_lines_are_counted_and_shown_not_guessed():
    for path in ALL:
        ls = lines(path)
        idx = [i for i, x in enumerate(ls) if "batch" in x or "Avg prompt" in x]
        if not idx:
            continue
        i = idx[-1]
        cut = ls[i][:len(ls[i]) * 2 // 3 - 1]
        data = "\n".join(ls[:i] + [cut]).encode()
        got = read_log(data).read
        plain = read_log(path.read_bytes()).read
        assert got.not_understood == 1, (path.name, cut)
        assert got.not_understood_examples[0]["text"] == cut
        assert len(records(got)) == len(records(plain)) - 1 - sum(1 for j in idx if j > i)


def test_multi_rank_duplicates_kept_once():
    path = next(p for p in SGLANG if p.name.startswith("18_"))
    ls = lines(path)
    out = []
    for x in ls:
        out.append(x)
        if " TP0]" in x:
            out += [x.replace(" TP0]", f" TP{k}]") for k in (1, 2, 3)]
    got = read_log("\n".join(out).encode()).read
    plain = read_log(path.read_bytes()).read
    assert records(got) == records(plain) and got.duplicates == 3 * len(plain.batches)
    ep = [x.replace(" TP0]", " TP0 EP0]") for x in ls] + [x.replace(" TP0]", " ATTN_CP4 TP4]") for x in ls]
    got = read_log("\n".join(ep).encode()).read
    assert len(got.batches) == len(plain.batches) and got.duplicates == len(plain.batches)


def test_interleaved_vllm_engines_are_lanes():
    path = next(p for p in VLLM if p.name.startswith("06_"))
    ls = lines(path)
    mixed = []
    for x in ls:
        mixed += [x, x.replace("Engine 000", "Engine 001").replace("Running: 1 reqs", "Running: 3 reqs")]
    got = read_log("\n".join(mixed).encode()).read
    assert got.lanes == ["Engine 000", "Engine 001"] and len(got.stats) == 2 * len(ls)
    twice = read_log("\n".join(ls + ls).encode()).read   # the same log pasted twice
    assert len(twice.stats) == len(ls) and twice.duplicates == len(ls)


def test_missing_years_and_days_turn():
    v = ("INFO 12-31 23:59:55 [loggers.py:236] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation "
         "throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.5%, Prefix cache hit rate: 0.0%")
    got = read_log((v + "\n" + v.replace("12-31 23:59:55", "01-01 00:00:05") + "\n").encode()).read
    assert [s["t"] for s in got.stats] == [0.0, 10.0]
    s = ("[23:59:59 TP0] Decode batch. #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.0, "
         "#queue-req: 0")
    got = read_log((s + "\n" + s.replace("23:59:59", "00:00:01") + "\n").encode()).read
    assert [b["t"] for b in got.batches] == [0.0, 2.0]


def test_legacy_2024_04_forms():
    text = ("new fill batch. #seq: 1. #cached_token: 0. #new_token: 12. #remaining_req: 0. #running_req: 0. "
            "tree_cache_hit_rate: 0.00%.\n"
            "#running-req: 1, #token: 35, token usage: 0.00, gen throughput (token/s): 9.34, #queue-req: 0\n")
    got = read_log(text.encode()).read
    assert got.engine == "sglang" and got.era.startswith("2024-04")
    assert [b["kind"] for b in got.batches] == ["prefill", "decode"]
    assert got.batches[0]["new_tokens"] == 12 and got.batches[0]["cached_tokens"] == 0
    assert got.batches[1]["kv_tokens"] == 35 and got.batches[0]["t"] is None


def test_pd_and_reordered_fields():
    pre = ("[2025-12-01 10:00:00 DP0 TP0] Prefill batch, #new-seq: 2, #new-token: 100, #cached-token: 5, token usage: "
           "0.10, #running-req: 1, #queue-req: 0, #prealloc-req: 1, #inflight-req: 2, input throughput (token/s): 9.5, "
           "cuda graph: False")
    dec = ("[2025-12-01 10:00:01 DP0 TP0] Decode batch, #running-req: 3, #token: 500, token usage: 0.20, pre-allocated "
           "usage: 0.01, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput "
           "(token/s): 40.0, #queue-req: 2")
    reordered = ("[2025-12-01 10:00:02 DP0 TP0] Decode batch, #running-req: 3, #token: 503, token usage: 0.20, "
                 "gen throughput (token/s): 40.0, cuda graph: True, #queue-req: 2, #new-field: 7")
    got = read_log("\n".join([pre, dec, reordered]).encode()).read
    assert got.not_understood == 0
    assert got.batches[0]["inflight_req"] == 2 and got.batches[1]["transfer_req"] == 1
    assert got.batches[2]["other"] == {"new_field": 7} and got.batches[2]["waiting"] == 2
    assert any("prefill side" in t for t in got.traits) and any("decode side" in t for t in got.traits)


def test_a_file_mixing_engines_says_so():
    s = b"".join(p.read_bytes() for p in SGLANG[:3])
    v = VLLM[1].read_bytes()
    got = read_log(s + v).read
    assert got.engine == "sglang" and got.other_engine_lines == {"vllm": 5}
    assert any("also holds 5 line(s) of vLLM" in w for w in got.warnings)


def test_same_input_same_bytes():
    from sim.jsonout import dumps_strict
    for p in ALL:
        a, b = read_log(p.read_bytes()), read_log(gzip.compress(p.read_bytes(), mtime=0))
        assert dumps_strict(a.read.to_json() | {"bytes_read": 0}) == dumps_strict(b.read.to_json() | {"bytes_read": 0})
        assert a.trace.to_bytes() == read_log(p.read_bytes()).trace.to_bytes()
