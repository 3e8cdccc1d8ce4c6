"""Unit tests of the router policies (sim/fleet/routers/*) and the approximate tree (sim/fleet/radix.py).

Pure unit tests: ReplicaViews and a RouterContext built by hand, a small fake cached_blocks."""
from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest

from sim.fleet.radix import RadixTree, shared_prefix_len
from sim.fleet.routers import make_router, router_names
from sim.fleet.routing import ROUTERS, ReplicaView, RouterContext
from sim.fleet.routers.hashing import fbi_hash, furc_hash, murmur_hash_64a
from sim.fleet.routers.llmd import normalized_precise
from sim.workload import Request


# ---------------------------------------------------------------- helpers

def views(in_flight=None, n=None, waiting=None, running=None, kv=None, block_size=16, num_blocks=1000):
    n = n if n is not None else len(in_flight or waiting or running or kv)
    in_flight = in_flight or [0] * n
    waiting = waiting or [0] * n
    running = running or [0] * n
    kv = kv or [0.0] * n
    return [ReplicaView(i, in_flight[i], waiting[i], running[i], kv[i], int(kv[i] * num_blocks),
                        num_blocks, block_size) for i in range(n)]


def req(rid, tokens=None, tenant="default", text=None):
    tokens = tuple(tokens if tokens is not None else range(100, 132))
    r = Request(id=rid, prompt_len=len(tokens), max_tokens=8, arrival_time=0.0, tenant=tenant,
                prompt_token_ids=tokens)
    if text is not None:
        TEXTS[rid] = text
    return r


TEXTS: dict = {}


def ctx(vs, time=0.0, cached=None):
    """A RouterContext; `cached` maps (replica, request id) -> leading cached blocks."""
    cached = cached or {}
    return RouterContext(time, vs, lambda i, r: cached.get((i, r.id), 0),
                         lambda r: list(r.prompt_token_ids),
                         lambda r: TEXTS.get(r.id, " ".join(map(str, r.prompt_token_ids))))


def send(router, r, c, replica=None):
    """route + dispatched (to the pick, or to `replica` as a replay would)."""
    d = router.route(r, c)
    router.dispatched(r, d.replica if replica is None else replica, c)
    return d


def one_sentence(msg: str) -> bool:
    return "\n" not in msg and ". " not in msg and len(msg) > 10


def assert_scores_shape(d, n):
    for name, vals in d.scores.items():
        assert len(vals) == n, name
        assert all(isinstance(v, float) for v in vals), name


def toks(seed, n):
    rng = random.Random(seed)
    return [rng.randrange(1000, 30000) for _ in range(n)]


# ---------------------------------------------------------------- registry and config errors

def test_all_routers_registered():
    names = set(router_names())
    assert {"round_robin", "random", "power_of_two", "least_loaded", "consistent_hash", "cache_aware",
            "precise_prefix", "weighted", "kv_cost"} <= names


@pytest.mark.parametrize("name,config,word", [
    ("cache_aware", {"nonsense": 1}, "nonsense"),
    ("least_loaded", {"signal": "queue"}, "signal"),
    ("consistent_hash", {"key": "session"}, "key"),
    ("cache_aware", {"granularity": "word"}, "granularity"),
    ("cache_aware", {"flavor": "nginx"}, "flavor"),
    ("cache_aware", {"owner": "oldest"}, "owner"),
    ("cache_aware", {"cache_threshold": 1.5}, "cache_threshold"),
    ("cache_aware", {"cache_threshold": float("nan")}, "cache_threshold"),
    ("weighted", {"queue_weight": float("nan")}, "queue_weight"),
    ("weighted", {"kv_weight": -1.0}, "kv_weight"),
    ("weighted", {"queue_weight": 0, "kv_weight": 0, "prefix_weight": 0}, "prefix_weight"),
    ("weighted", {"prefix": "exact"}, "prefix"),
    ("weighted", {"hash_block_size": 0}, "hash_block_size"),
    ("precise_prefix", {"tie_break": "coin"}, "tie_break"),
    ("kv_cost", {"prefill_load_scale": -0.5}, "prefill_load_scale"),
    ("kv_cost", {"router_temperature": float("inf")}, "router_temperature"),
    ("consistent_hash", {"url_format": "http://{host}:{port}"}, "url_format"),
    ("consistent_hash", {"virtual_nodes": 0}, "virtual_nodes"),
])
def test_config_errors_are_one_plain_sentence(name, config, word):
    with pytest.raises(ValueError) as e:
        make_router(name, 3, config)
    msg = str(e.value)
    assert word in msg
    assert one_sentence(msg), msg


def test_unknown_router_name():
    with pytest.raises(ValueError) as e:
        make_router("shortest_queue", 2)
    assert "shortest_queue" in str(e.value) and one_sentence(str(e.value))


# ---------------------------------------------------------------- random

def picks(name, n, c, count=30, config=None, seed=0, rid=None):
    """The replicas one router (made with `seed`) picks for `count` requests."""
    r = make_router(name, n, config, seed=seed)
    return [r.route(req(rid or f"q{i}"), c).replica for i in range(count)]


def test_random_is_seeded_and_uniform():
    c = ctx(views(n=4))
    assert picks("random", 4, c, 60, seed=1) == picks("random", 4, c, 60, seed=1)
    assert picks("random", 4, c, 60, seed=1) != picks("random", 4, c, 60, seed=2)
    seq = picks("random", 4, c, 60, seed=5)
    counts = [seq.count(i) for i in range(4)]
    assert all(k > 5 for k in counts), counts          # 60 draws over 4: each well above 0


# ---------------------------------------------------------------- power of two

def test_power_of_two_lower_load_wins_and_records_both():
    r = make_router("power_of_two", 2, seed=0)
    c = ctx(views([5, 1]))
    for i in range(20):
        d = r.route(req(f"q{i}"), c)
        assert d.replica == 1
        assert sorted(d.candidates) == [0, 1]
        assert d.reason == "lower_load"
        assert d.scores["in_flight"] == [5.0, 1.0]
        assert d.detail["loads"] == tuple(c.replicas[j].in_flight for j in d.candidates)


def test_power_of_two_tie_goes_to_first_drawn_and_pairs_are_distinct():
    r = make_router("power_of_two", 6, seed=11)
    c = ctx(views([2, 2, 2, 2, 2, 2]))
    firsts = set()
    for i in range(50):
        d = r.route(req(f"q{i}"), c)
        a, b = d.candidates
        assert a != b
        assert d.reason == "tie_first_drawn"
        assert d.replica == a
        firsts.add(a)
        nan_at = [j for j, v in enumerate(d.scores["in_flight"]) if math.isnan(v)]
        assert sorted(set(range(6)) - set(nan_at)) == sorted((a, b))
    assert len(firsts) > 3          # the first drawn varies: random order, not worker order


def test_power_of_two_mixed_loads_and_single_replica():
    r = make_router("power_of_two", 4, seed=2)
    c = ctx(views([3, 0, 3, 3]))
    for i in range(40):
        d = r.route(req(f"q{i}"), c)
        loads = {j: c.replicas[j].in_flight for j in d.candidates}
        assert d.replica == min(d.candidates, key=lambda j: (loads[j], d.candidates.index(j)))
    one = make_router("power_of_two", 1)
    d = one.route(req("x"), ctx(views([7])))
    assert d.replica == 0 and d.candidates == (0,)


def test_power_of_two_seeded():
    c = ctx(views([1, 1, 0, 2, 1]))
    seq = lambda s: [d.candidates for r in [make_router("power_of_two", 5, seed=s)]
                     for d in (r.route(req(f"q{i}"), c) for i in range(30))]
    assert seq(4) == seq(4)
    assert seq(4) != seq(5)


# ---------------------------------------------------------------- least loaded

def test_least_loaded_signals_and_ties():
    r = make_router("least_loaded", 4)
    d = r.route(req("a"), ctx(views([3, 1, 1, 2])))
    assert d.replica == 1 and d.reason == "tie_first"
    d = r.route(req("a"), ctx(views([3, 2, 0, 2])))
    assert d.replica == 2 and d.reason == "least_loaded"
    assert d.scores["in_flight"] == [3.0, 2.0, 0.0, 2.0]
    w = make_router("least_loaded", 3, {"signal": "waiting"})
    assert w.route(req("a"), ctx(views([0, 9, 9], waiting=[5, 1, 3]))).replica == 1
    k = make_router("least_loaded", 3, {"signal": "kv_usage"})
    d = k.route(req("a"), ctx(views([0, 0, 0], kv=[0.5, 0.7, 0.2])))
    assert d.replica == 2 and list(d.scores) == ["kv_usage"]
    ru = make_router("least_loaded", 3, {"signal": "running"})
    assert ru.route(req("a"), ctx(views([0, 0, 0], running=[4, 4, 1]))).replica == 2


# ---------------------------------------------------------------- consistent hash

def test_murmur_hash_64a_published_vectors():
    # MurmurHash64A test vectors published with other ports of it (a Python and a C++ one)
    assert murmur_hash_64a(b"fransisco", 1) == 0x83FDAF4A6D0D3D9
    assert murmur_hash_64a(b"aaaa", 0x9747B28C) == 0x41DA53FDABAF04C8
    assert murmur_hash_64a(b"hash me", 22) == 15828218858260124487
    assert murmur_hash_64a(b"hash me", 330) == 11490980199443804233


def test_furc_hash_mcrouter_vectors_and_the_rust_port_difference():
    # facebook/mcrouter routes/test/ConstShardHashFuncTest.cpp (ch3Fallback: furc_hash(key, 4))
    for key, want in (("blahmeh", 2), ("blah:meh", 0), ("blah::meh", 1), ("blah:4:meh", 3)):
        assert furc_hash(key, 4) == want, key
    # mcrouter gives 0 here; vllm-router's port tests d == 0 before decrementing, so it looks at
    # bit 0 once more and returns 1 (hashing.py follows vllm-router)
    assert furc_hash("blah:12c34:meh", 4) == 1


def test_murmur_and_furc_basic_properties():
    assert murmur_hash_64a(b"", 0) == 0                 # h = seed ^ 0, every step keeps 0
    a, b = murmur_hash_64a(b"abcdefgh1", 7), murmur_hash_64a(b"abcdefgh2", 7)
    assert a != b and 0 <= a < 2 ** 64
    assert murmur_hash_64a(b"abc", 1) != murmur_hash_64a(b"abc", 2)
    for key in ("a", "tenant-1", "x" * 50):
        for m in (1, 2, 3, 10, 1000):
            assert 0 <= furc_hash(key, m) < m
    assert furc_hash("anything", 1) == 0
    # consistency of FurcHash: growing the modulus by one moves a key only to the new bucket
    moved_wrong = 0
    for i in range(300):
        k = f"k{i}"
        x, y = furc_hash(k, 7), furc_hash(k, 8)
        moved_wrong += x != y and y != 7
    assert moved_wrong == 0


def test_ring_is_the_same_in_another_process():
    code = ("from sim.fleet.routers.hashing import fbi_hash, build_ring;"
            "print(fbi_hash('header:x-tenant-id:acme'), build_ring(('http://127.0.0.1:8101','http://127.0.0.1:8102'), 160)[1][:20])")
    outs = set()
    for seed in ("1", "2"):
        env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=".")
        assert p.returncode == 0, p.stderr
        outs.add(p.stdout)
    assert len(outs) == 1
    assert str(fbi_hash("header:x-tenant-id:acme")) in outs.pop()


def test_consistent_hash_by_tenant_and_by_request():
    r = make_router("consistent_hash", 4)
    c = ctx(views(n=4))
    first = {t: r.route(req(f"{t}-0", tenant=t), c).replica for t in (f"t{i}" for i in range(40))}
    for t, rep in first.items():
        d = r.route(req(f"{t}-again", tenant=t), c)
        assert d.replica == rep
        assert d.detail["key"] == f"header:x-tenant-id:{t}"
    assert len(set(first.values())) == 4           # 40 tenants spread over all 4
    rq = make_router("consistent_hash", 4, {"key": "request"})
    by_req = {rq.route(req(f"id{i}", tenant="same"), c).replica for i in range(40)}
    assert len(by_req) == 4                        # one tenant, but keyed per request: spread


def test_consistent_hash_ring_lookup_and_wrap_around():
    r = make_router("consistent_hash", 3, {"virtual_nodes": 2})
    ring = sorted((fbi_hash(f"http://127.0.0.1:{8101 + w}:{i}"), w) for w in range(3) for i in range(2))
    assert [p for p, _ in ring] == list(r.positions)
    c = ctx(views(n=3))
    wrapped = 0
    for k in range(60):
        q = req(f"r{k}", tenant=f"ten{k}")
        h = fbi_hash(f"header:x-tenant-id:ten{k}")
        after = [w for p, w in ring if p >= h]
        want = after[0] if after else ring[0][1]
        wrapped += not after
        d = r.route(q, c)
        assert d.replica == want and d.detail["hash"] == h
    assert wrapped > 0


def test_consistent_hash_moves_few_keys_when_a_replica_joins():
    c4, c5 = ctx(views(n=4)), ctx(views(n=5))
    r4, r5 = make_router("consistent_hash", 4), make_router("consistent_hash", 5)
    moved = same = 0
    for i in range(200):
        q = req(f"r{i}", tenant=f"tenant{i}")
        a, b = r4.route(q, c4).replica, r5.route(q, c5).replica
        if a != b:
            moved += 1
            assert b == 4                          # a key only moves to the new replica
        else:
            same += 1
    assert 10 < moved < 90                         # about a fifth of 200


# ---------------------------------------------------------------- radix tree

def test_shared_prefix_len_matches_brute_force():
    rng = random.Random(3)
    for _ in range(300):
        a = tuple(rng.randrange(3) for _ in range(rng.randrange(0, 30)))
        b = tuple(rng.randrange(3) for _ in range(rng.randrange(1, 30)))
        pos = rng.randrange(0, len(a) + 1)
        want = 0
        while pos + want < len(a) and want < len(b) and a[pos + want] == b[want]:
            want += 1
        assert shared_prefix_len(a, pos, b) == want
        sa, sb = "".join(map(str, a)), "".join(map(str, b))
        assert shared_prefix_len(sa, pos, sb) == want


def test_tree_insert_split_match_and_sizes():
    t = RadixTree()
    t.insert((1, 2, 3, 4), 0)
    t.insert((1, 2, 9), 1)
    m, node, path = t.match((1, 2, 3, 4, 5))
    assert m == 4 and set(node.tenants) == {0}
    m, node, _ = t.match((1, 2, 7))
    assert m == 2 and set(node.tenants) == {0, 1}
    assert t.size == {0: 4, 1: 3}
    assert RadixTree.matched_per_tenant(t.match((1, 2, 3, 4))[2], 3) == [4.0, 2.0, 0.0]
    m, node, _ = t.match((1, 2, 3, 8))             # partial match inside a node still counts
    assert m == 3 and set(node.tenants) == {0}
    # the shared node keeps its creator as cached owner
    _, node, _ = t.match((1, 2))
    assert t.owner(node, touch=False) == 0


def recount(tree):
    size, stack = {}, [tree.root]
    while stack:
        node = stack.pop()
        stack.extend(node.children.values())
        for t in node.tenants:
            size[t] = size.get(t, 0) + len(node.label)
    return size


def test_tree_sizes_stay_consistent_under_inserts_and_eviction():
    rng = random.Random(9)
    t = RadixTree()
    bases = [tuple(rng.randrange(50) for _ in range(20)) for _ in range(5)]
    for k in range(200):
        key = rng.choice(bases)[:rng.randrange(1, 20)] + tuple(rng.randrange(50) for _ in range(rng.randrange(0, 15)))
        t.insert(key, rng.randrange(4))
        if k % 50 == 49:
            t.evict_by_size(60)
            for tenant, s in t.size.items():
                assert s <= 60
        got = recount(t)
        assert {k2: v for k2, v in t.size.items() if v} == {k2: v for k2, v in got.items() if v}


def test_eviction_drops_least_recently_used_first():
    t = RadixTree()
    old, new = tuple(range(0, 50)), tuple(range(100, 150))
    t.insert(old, 0)
    t.insert(new, 0)
    assert t.size[0] == 100
    t.evict_by_size(60)
    assert t.size[0] == 50
    assert t.match(old)[0] == 0
    assert t.match(new)[0] == 50


# ---------------------------------------------------------------- cache aware

def test_cache_aware_hit_goes_to_the_prefix_owner_miss_to_least_loaded():
    r = make_router("cache_aware", 3)
    a = toks(1, 64)
    d = send(r, req("a", a), ctx(views([1, 0, 0])))
    assert d.reason == "prefix_miss" and d.replica == 1       # least loaded, the first of the tie
    assert d.detail["match_rate"] == 0.0
    d = r.route(req("b", a[:40] + toks(2, 24)), ctx(views([1, 5, 0])))
    assert d.reason == "prefix_hit" and d.replica == 1
    assert d.detail["matched"] == 40 and d.detail["match_rate"] == pytest.approx(40 / 64)
    assert d.scores["matched"] == [0.0, 40.0, 0.0]
    assert d.scores["in_flight"] == [1.0, 5.0, 0.0]
    assert_scores_shape(d, 3)


def test_cache_aware_threshold_30_of_80_tokens_is_a_hit_20_is_not():
    r = make_router("cache_aware", 2)
    base = toks(3, 80)
    send(r, req("a", base), ctx(views([0, 0])))               # goes to 0, the first of the tie
    hit = r.route(req("b", base[:30] + toks(4, 50)), ctx(views([3, 0])))
    assert hit.reason == "prefix_hit" and hit.replica == 0    # 30/80 = 0.375 > 0.3
    miss = r.route(req("c", base[:20] + toks(5, 60)), ctx(views([3, 0])))
    assert miss.reason == "prefix_miss" and miss.replica == 1  # 20/80 = 0.25
    edge = r.route(req("e", base[:24] + toks(15, 56)), ctx(views([3, 0])))
    assert edge.detail["match_rate"] == pytest.approx(0.3) and edge.reason == "prefix_miss"  # not > 0.3
    strict = make_router("cache_aware", 2, {"cache_threshold": 0.4})
    send(strict, req("a", base), ctx(views([0, 0])))
    assert strict.route(req("b", base[:30] + toks(4, 50)), ctx(views([3, 0]))).reason == "prefix_miss"


def test_cache_aware_char_granularity_reads_the_text_not_the_ids():
    text_a = "You are a helpful assistant. " * 4 + "Question one?"
    text_b = "You are a helpful assistant. " * 4 + "Another thing entirely"
    a = req("ta", toks(6, 30), text=text_a)
    b = req("tb", toks(7, 30), text=text_b)                   # no token in common with a
    by_char = make_router("cache_aware", 2, {"granularity": "char"})
    send(by_char, a, ctx(views([0, 0])))
    d = by_char.route(b, ctx(views([2, 0])))
    assert d.reason == "prefix_hit" and d.replica == 0
    assert d.detail["prompt_len"] == len(text_b)
    by_token = make_router("cache_aware", 2)
    send(by_token, a, ctx(views([0, 0])))
    d = by_token.route(b, ctx(views([2, 0])))
    assert d.reason == "prefix_miss" and d.replica == 1


def test_cache_aware_imbalance_goes_least_loaded_and_still_teaches_the_tree():
    r = make_router("cache_aware", 3)
    p = toks(8, 60)
    send(r, req("a", p), ctx(views([0, 0, 0])))               # on 0
    d = send(r, req("b", p), ctx(views([70, 3, 0])))           # 70-0 > 64 and 70 > 1.5*0
    assert d.reason == "load_imbalance" and d.replica == 2
    assert set(r.tree.tenants_of(r.key_of(req("k", p), ctx(views([0, 0]))))) == {0, 2}
    # 70 - 10 = 60 is not > 64: balanced, so the prefix wins even on the busiest
    d = r.route(req("c", p), ctx(views([70, 10, 12])))
    assert d.reason == "prefix_hit" and d.replica == 0
    # both conditions needed: 200 - 100 > 64 but 200 > 1.5*100 is false at rel 2.5
    r2 = make_router("cache_aware", 2, {"balance_rel_threshold": 2.5})
    send(r2, req("a", p), ctx(views([0, 0])))
    assert r2.route(req("b", p), ctx(views([200, 100]))).reason == "prefix_hit"
    assert r2.route(req("c", p), ctx(views([300, 100]))).reason == "load_imbalance"


def test_cache_aware_owner_rules():
    p = toks(9, 50)
    for owner, want in (("creator", 0), ("least_loaded", 1)):
        r = make_router("cache_aware", 3, {"owner": owner})
        send(r, req("a", p), ctx(views([0, 0, 0])), replica=0)
        send(r, req("b", p), ctx(views([0, 0, 0])), replica=1)   # replay: the real router chose 1
        d = r.route(req("c", p), ctx(views([5, 2, 0])))
        assert d.reason == "prefix_hit" and d.replica == want, owner
        assert set(d.detail["owners"]) == {0, 1}


def test_cache_aware_dispatched_follows_the_real_choice():
    r = make_router("cache_aware", 2)
    p = toks(10, 40)
    d = r.route(req("a", p), ctx(views([0, 0])))
    assert d.replica == 0
    r.dispatched(req("a", p), 1, ctx(views([0, 0])))
    assert set(r.tree.tenants_of(r.key_of(req("k", p), ctx(views([0, 0]))))) == {1}
    assert r.route(req("b", p), ctx(views([0, 0]))).replica == 1


def test_cache_aware_eviction_by_size_at_intervals():
    r = make_router("cache_aware", 2, {"max_tree_size": 100, "eviction_interval_ms": 1000})
    old, mid, new = toks(11, 60), toks(12, 60), toks(13, 60)
    for i, p in enumerate((old, mid, new)):
        send(r, req(f"p{i}", p), ctx(views([0, 5]), time=100.0 * i), replica=0)
    assert r.tree.size[0] == 180
    r.route(req("probe0", toks(14, 10)), ctx(views([0, 0]), time=999.0))
    assert r.tree.size[0] == 180 and r.evictions == 0          # not yet
    d = r.route(req("probe1", old), ctx(views([0, 0]), time=1000.0))
    assert r.evictions == 1 and r.tree.size[0] <= 100
    assert d.reason == "prefix_miss"                            # the oldest went first
    assert r.route(req("probe2", new), ctx(views([0, 0]), time=1001.0)).reason == "prefix_hit"
    never = make_router("cache_aware", 2, {"max_tree_size": 10, "eviction_interval_ms": 0})
    send(never, req("x", old), ctx(views([0, 0])), replica=0)
    never.route(req("y", new), ctx(views([0, 0]), time=1e9))
    assert never.tree.size[0] == 60 and never.evictions == 0


def test_cache_aware_flavors():
    v = make_router("cache_aware", 2)
    assert (v.config["granularity"], v.config["eviction_interval_ms"], v.config["max_tree_size"]) == \
        ("token", 120000, 33554432)
    s = make_router("cache_aware", 2, {"flavor": "sglang"})
    assert (s.config["granularity"], s.config["eviction_interval_ms"], s.config["max_tree_size"]) == \
        ("char", 60000, 67108864)
    s2 = make_router("cache_aware", 2, {"flavor": "sglang", "granularity": "token"})
    assert s2.config["granularity"] == "token" and s2.config["eviction_interval_ms"] == 60000


def test_cache_aware_is_deterministic():
    def run():
        r = make_router("cache_aware", 4, seed=1)
        rng = random.Random(0)
        bases = [toks(20 + i, 40) for i in range(3)]
        out = []
        for i in range(60):
            p = rng.choice(bases) + toks(100 + i, 20)
            loads = [rng.randrange(3) for _ in range(4)]
            out.append(send(r, req(f"q{i}", p), ctx(views(loads))).replica)
        return out
    a = run()
    assert a == run()
    assert len(set(a)) > 1


# ---------------------------------------------------------------- precise prefix (llm-d)

def test_llmd_normalisation():
    assert normalized_precise([0, 3, 5, 5]) == [0.0, 0.0, 1.0, 1.0]
    assert normalized_precise([0, 4, 4]) == [0.0, 1.0, 1.0]
    assert normalized_precise([2, 4, 6]) == [0.0, 0.5, 1.0]
    assert normalized_precise([0, 0]) == [0.0, 0.0]


def test_precise_prefix_most_cached_then_in_flight_then_first():
    r = make_router("precise_prefix", 4)
    q = req("a")
    d = r.route(q, ctx(views([0, 5, 0, 0]), cached={(1, "a"): 3, (2, "a"): 1}))
    assert d.replica == 1 and d.reason == "most_cached"
    assert d.scores["cached_blocks"] == [0.0, 3.0, 1.0, 0.0]
    assert d.scores["prefix"] == [0.0, 1.0, 0.0, 0.0]
    assert_scores_shape(d, 4)
    d = r.route(q, ctx(views([4, 2, 2, 0]), cached={(0, "a"): 3, (1, "a"): 3, (2, "a"): 3}))
    assert d.replica == 1 and d.reason == "tie_in_flight"
    d = r.route(q, ctx(views([1, 1, 1, 1])))
    assert d.replica == 0 and d.reason == "no_cache_hit"


def test_precise_prefix_random_ties_are_seeded():
    c = ctx(views([0, 0, 0, 0]), cached={(i, "a"): 2 for i in range(4)})
    rand = {"tie_break": "random"}
    assert picks("precise_prefix", 4, c, config=rand, seed=1, rid="a") == \
        picks("precise_prefix", 4, c, config=rand, seed=1, rid="a")
    assert picks("precise_prefix", 4, c, config=rand, seed=1, rid="a") != \
        picks("precise_prefix", 4, c, config=rand, seed=2, rid="a")
    assert len(set(picks("precise_prefix", 4, c, config=rand, seed=1, rid="a"))) > 1
    assert set(picks("precise_prefix", 4, c, rid="a")) == {0}     # in_flight ties: the first


# ---------------------------------------------------------------- weighted (llm-d / GIE)

def test_weighted_scores_and_pick():
    r = make_router("weighted", 3, {"prefix_weight": 0})
    d = r.route(req("a"), ctx(views([0, 0, 0], waiting=[4, 0, 2], kv=[0.1, 0.9, 0.2])))
    assert d.scores["queue"] == [0.0, 1.0, 0.5]
    assert d.scores["kv"] == pytest.approx([0.9, 0.1, 0.8])
    assert d.scores["total"] == pytest.approx([1.8, 2.2, 2.6])
    assert all(math.isnan(x) for x in d.scores["prefix"])
    assert d.replica == 2 and d.reason == "max_score"
    assert_scores_shape(d, 3)
    same = r.route(req("a"), ctx(views([0, 0, 0], waiting=[3, 3, 3])))
    assert same.scores["queue"] == [1.0, 1.0, 1.0]


def test_weighted_approximate_prefix_follows_what_was_sent():
    r = make_router("weighted", 3)
    text = "w" * 64 * 5 + "tail"                   # 5 full 64-byte blocks (+ the model's hash)
    a = req("a", text=text)
    c = ctx(views([0, 0, 0]))
    send(r, a, c, replica=2)
    d = r.route(req("b", text=text), c)
    assert d.scores["prefix"] == [0.0, 0.0, 1.0]
    assert d.detail["prefix_blocks"] == 6
    assert d.replica == 2 and d.reason == "max_score"
    # half the prompt shared: 1 model hash + 2 of 5 blocks
    d = r.route(req("c", text="w" * 128 + "z" * 192), c)
    assert d.scores["prefix"][2] == pytest.approx(3 / 6)
    # an unrelated prompt still matches the model's hash on any replica that was sent one
    d = r.route(req("d", text="q" * 640), c)
    assert d.scores["prefix"] == [0.0, 0.0, pytest.approx(1 / 11)]
    # too short for one block: no blocks, prefix 0 everywhere
    d = r.route(req("e", text="short"), c)
    assert d.scores["prefix"] == [0.0, 0.0, 0.0]


def test_weighted_lru_capacity_forgets_old_blocks():
    r = make_router("weighted", 2, {"lru_capacity_per_server": 8})
    c = ctx(views([0, 0]))
    first = "a" * 64 * 4
    send(r, req("a", text=first), c, replica=1)
    assert r.route(req("a2", text=first), c).scores["prefix"][1] == 1.0
    send(r, req("b", text="b" * 64 * 7), c, replica=1)          # 8 more hashes: the first ones go
    assert r.route(req("a3", text=first), c).scores["prefix"][1] < 1.0


def test_weighted_lru_keeps_what_was_sent_again():
    r = make_router("weighted", 2, {"lru_capacity_per_server": 6})
    c = ctx(views([0, 0]))
    x = "a" * 64 * 3                               # model hash + 3 blocks
    send(r, req("x", text=x), c, replica=1)
    send(r, req("y", text="b" * 64 * 2), c, replica=1)   # + 2 blocks: 6 held, at capacity
    send(r, req("x2", text=x), c, replica=1)       # x's hashes become the most recent
    send(r, req("z", text="c" * 64 * 2), c, replica=1)   # 2 more: y's 2 blocks go, not x's
    assert r.route(req("x3", text=x), c).scores["prefix"][1] == 1.0
    assert r.route(req("y2", text="b" * 64 * 2), c).scores["prefix"][1] == pytest.approx(1 / 3)


def test_weighted_precise_mode_and_seeded_ties():
    r = make_router("weighted", 3, {"prefix": "precise"})
    d = r.route(req("a"), ctx(views([0, 0, 0]), cached={(0, "a"): 2, (1, "a"): 4}))
    assert d.scores["prefix"] == [0.0, 1.0, 0.0] and d.replica == 1
    c = ctx(views([0, 0, 0, 0]))
    assert picks("weighted", 4, c, seed=3, rid="t") == picks("weighted", 4, c, seed=3, rid="t")
    assert picks("weighted", 4, c, seed=3, rid="t") != picks("weighted", 4, c, seed=4, rid="t")
    d = make_router("weighted", 4).route(req("t", text="x"), c)
    assert d.reason == "tie_random" and d.detail["tied"] == (0, 1, 2, 3)


# ---------------------------------------------------------------- kv_cost (Dynamo)

def test_kv_cost_formula_by_hand():
    r = make_router("kv_cost", 2)
    p = list(range(64))                            # 4 blocks of 16
    d = r.route(req("a", p), ctx(views([0, 0]), cached={(1, "a"): 3}))
    # replica 0: prefill 64/16 = 4, no credit; decode 4 new blocks -> 8
    # replica 1: prefill max(4 - 3, 0) = 1; decode 4 -> 5
    assert d.scores["cost"] == [8.0, 5.0]
    assert d.scores["prefill_blocks"] == [4.0, 1.0]
    assert d.scores["decode_blocks"] == [4.0, 4.0]
    assert d.scores["overlap_blocks"] == [0.0, 3.0]
    assert d.replica == 1 and d.reason == "lowest_cost"
    scaled = make_router("kv_cost", 2, {"prefill_load_scale": 2.0, "overlap_score_credit": 0.5})
    d = scaled.route(req("a", p), ctx(views([0, 0]), cached={(1, "a"): 4}))
    assert d.scores["cost"] == [2 * 4 + 4, 2 * (4 - 2) + 4]


def test_kv_cost_tracks_active_blocks_and_prefill_until_released():
    r = make_router("kv_cost", 2)
    p = list(range(64))
    c = ctx(views([0, 0]))
    send(r, req("a", p), c, replica=0)
    assert r.active_blocks(0) == 4 and r.active_prefill_tokens(0) == 64
    d = r.route(req("b", p), c)
    # replica 0: prefill (64 + 64)/16 = 8; decode 4 active + 0 new (same blocks) = 4 -> 12
    assert d.scores["cost"] == [12.0, 8.0] and d.replica == 1
    send(r, req("b", p), c, replica=0)             # same prompt again: blocks shared, counted once
    assert r.active_blocks(0) == 4 and r.active_prefill_tokens(0) == 128
    r.prefill_done(req("a", p), 0, 5.0)
    assert r.active_prefill_tokens(0) == 64
    r.released(req("a", p), 0, 9.0)
    assert r.active_blocks(0) == 4 and r.active_prefill_tokens(0) == 64
    r.released(req("b", p), 0, 9.0)
    assert r.active_blocks(0) == 0 and r.active_prefill_tokens(0) == 0
    # a prompt sharing 2 of its 4 blocks with an active one adds 2 new blocks
    send(r, req("c", p), c, replica=1)
    d = r.route(req("d", p[:32] + list(range(500, 532))), c)
    assert d.scores["decode_blocks"] == [4.0, 6.0]


def test_kv_cost_cached_tokens_reduce_the_prefill_counted():
    r = make_router("kv_cost", 2)
    p = list(range(64))
    send(r, req("a", p), ctx(views([0, 0]), cached={(0, "a"): 2}), replica=0)
    assert r.active_prefill_tokens(0) == 64 - 2 * 16


def test_kv_cost_ties_and_temperature_are_seeded():
    c = ctx(views([0, 0, 0, 0]))
    seq = lambda s, cfg: picks("kv_cost", 4, c, config=cfg, seed=s)
    assert seq(1, {}) == seq(1, {})
    assert seq(1, {}) != seq(2, {})
    d = make_router("kv_cost", 4).route(req("q"), c)
    assert d.reason == "tie_random" and d.detail["tied"] == (0, 1, 2, 3)
    warm = {"router_temperature": 0.5}
    assert seq(7, warm) == seq(7, warm)
    assert seq(7, warm) != seq(8, warm)
    d = make_router("kv_cost", 2, warm).route(req("a", list(range(64))), ctx(views([0, 0]), cached={(1, "a"): 4}))
    assert d.reason == "softmax"


# ---------------------------------------------------------------- every router's decision

@pytest.mark.parametrize("name", sorted(set(ROUTERS) - {"base"}))
def test_every_router_decides_within_range_with_full_score_lists(name):
    r = make_router(name, 5, seed=0)
    c = ctx(views([1, 0, 2, 0, 1], waiting=[0, 1, 0, 2, 0], kv=[0.1, 0.2, 0.3, 0.0, 0.5]),
            cached={(3, "z"): 1})
    for i in range(10):
        q = req("z" if i == 0 else f"z{i}", toks(i, 40))
        d = send(r, q, c)
        assert 0 <= d.replica < 5
        assert d.candidates and all(0 <= x < 5 for x in d.candidates)
        assert d.replica in d.candidates
        assert isinstance(d.reason, str) and d.reason
        assert_scores_shape(d, 5)
        r.released(q, d.replica, 1.0)
