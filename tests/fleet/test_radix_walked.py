"""cache_aware's insert after its own match (RadixTree.insert_walked) and insert build the tree
the sources' one-walk insert builds."""
from __future__ import annotations

import random
from array import array

import pytest

from sim.fleet.radix import Node, RadixTree, shared_prefix_len
from sim.fleet.routers.cache_aware import CacheAware
from sim.workload import Request


def plain_insert(tree: RadixTree, key, tenant) -> None:
    """The sources' insert as one walk that compares as it goes (the reference)."""
    tree.root.tenants.setdefault(tenant, 0)
    size = tree.size
    size.setdefault(tenant, 0)
    node, pos, n = tree.root, 0, len(key)
    while pos < n:
        first = key[pos]
        child = node.children.get(first)
        if child is None:
            node.children[first] = Node(key[pos:], node, {tenant: tree._tick()}, tenant)
            size[tenant] += n - pos
            return
        label = child.label
        shared = shared_prefix_len(key, pos, label)
        if shared < len(label):
            mid = Node(label[:shared], node, dict(child.tenants), child.last_tenant)
            child.label, child.parent = label[shared:], mid
            mid.children[child.label[0]] = child
            node.children[first] = mid
            child = mid
        if tenant not in child.tenants:
            size[tenant] += shared
            child.tenants[tenant] = 0
        node = child
        pos += shared
    node.tenants[tenant] = tree._tick()


def shape_of(tree: RadixTree):
    """Every node's label, tenants with stamps and cached tenant, children in key order; sizes; epoch."""
    def node(n):
        return (tuple(n.label), sorted(n.tenants.items()), n.last_tenant,
                [node(n.children[k]) for k in sorted(n.children)])
    return node(tree.root), sorted(tree.size.items()), tree.epoch


def random_keys(rng, n, kind):
    """Keys with shared prefixes of every kind: equal, one inside another, diverging mid-edge."""
    alphabet = 5
    stems = [[rng.randrange(alphabet) for _ in range(rng.randrange(1, 30))] for _ in range(6)]
    out = []
    for _ in range(n):
        stem = rng.choice(stems)
        key = stem[:rng.randrange(0, len(stem) + 1)] + [rng.randrange(alphabet) for _ in range(rng.randrange(0, 8))]
        if kind == "array":
            out.append(array("I", key))
        elif kind == "tuple":
            out.append(tuple(key))
        else:
            out.append("".join("abcde"[k] for k in key))
    return out


@pytest.mark.parametrize("kind", ["array", "tuple", "str"])
@pytest.mark.parametrize("seed", range(6))
def test_insert_after_match_is_insert(kind, seed):
    rng = random.Random(seed)
    empty = "" if kind == "str" else ()
    plain, walked = RadixTree(empty), RadixTree(empty)
    for t in range(4):
        plain.add_tenant(t)
        walked.add_tenant(t)
    for i, key in enumerate(random_keys(rng, 300, kind)):
        tenant = rng.randrange(4)
        walk = walked.match(key)
        assert walk[0] == plain.match(key)[0]
        if rng.random() < 0.5:   # route's owner() ticks and may refresh a stamp between the two
            assert plain.owner(plain.match(key)[1]) == walked.owner(walk[1])
        plain_insert(plain, key, tenant)
        if rng.random() < 0.5:
            walked.insert_walked(key, tenant, walk)
        else:
            walked.insert(key, tenant)
        if i % 37 == 36:
            assert plain.evict_by_size(20) == walked.evict_by_size(20)
        assert shape_of(plain) == shape_of(walked)


def test_dispatched_walks_again_when_the_tree_changed_after_route():
    """A dispatch after another insert (or an eviction) must not reuse route's walk."""
    r = CacheAware(2)
    r.tree.insert(array("I", [1, 2, 3, 4]), 0)

    class Ctx:
        time = 0.0
        in_flight = [0, 0]
        record_scores = False

        @staticmethod
        def prompt_tokens(req):
            return [1, 2, 9, 9]

    req = Request(id="a", prompt_len=4, max_tokens=1, arrival_time=0.0)
    r.route(req, Ctx)
    r.tree.insert(array("I", [1, 2, 5]), 1)   # splits the edge route walked
    r.dispatched(req, 0, Ctx)
    ref = RadixTree(())
    for t in range(2):
        ref.add_tenant(t)
    ref.insert(array("I", [1, 2, 3, 4]), 0)
    ref.owner(ref.match(array("I", [1, 2, 9, 9]))[1])
    ref.insert(array("I", [1, 2, 5]), 1)
    ref.insert(array("I", [1, 2, 9, 9]), 0)
    assert shape_of(r.tree) == shape_of(ref)


@pytest.mark.parametrize("seed", range(8))
def test_match_on_a_kept_prefix_walk_is_the_whole_match(seed):
    """match_on(match(prefix), rest) = match(prefix + rest) while the shape holds, and
    insert_walked with its base builds the same tree; every prefix length, mid-edge ends too."""
    rng = random.Random(seed)
    plain, kept = RadixTree(()), RadixTree(())
    for t in range(3):
        plain.add_tenant(t)
        kept.add_tenant(t)
    walks: dict = {}
    shape = kept.shape
    for key in random_keys(rng, 400, "array"):
        tenant = rng.randrange(3)
        cut = rng.randrange(1, len(key) + 1) if len(key) else 0
        prefix, rest = key[:cut], key[cut:]
        whole = plain.match(key)
        if kept.shape != shape:
            walks.clear()
            shape = kept.shape
        walk = walks.get(bytes(prefix)) or kept.match(prefix)
        if walk[0] == cut and cut:
            walks[bytes(prefix)] = walk
            got = kept.match_on(walk, rest, cut)
            base, k = cut, rest
        else:
            got, base, k = kept.match(key), 0, key
        assert (got[0], [d for _, d in got[2]]) == (whole[0], [d for _, d in whole[2]])
        assert got[1].label == whole[1].label
        plain_insert(plain, key, tenant)
        kept.insert_walked(k, tenant, got, base)
        if rng.random() < 0.05:
            assert plain.evict_by_size(25) == kept.evict_by_size(25)
        assert shape_of(plain) == shape_of(kept)

