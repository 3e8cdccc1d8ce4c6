"""The approximate prefix tree of vllm-router's and sglang-router's `cache_aware` policy.

One compressed radix tree shared by all replicas (the routers' "tenants"), as in
vllm-project/router `src/tree.rs` and sgl-project/sglang `sgl-model-gateway/src/policies/tree.rs`
(the two files are the same design): every node holds an edge label and, per tenant that was
sent a prompt through it, a last-access stamp. What it records is what the router SENT to each
replica, not what the replica still holds in its KV cache.

The key is a sequence of token ids (vllm-router 0.1.17, which matches token ids; an
array('I') or a tuple, one kind per tree) or a str (the stored sources and sglang-router 0.3.2,
which match characters of the prompt text). Edge labels are slices of the key, compared slice
against slice so that the work runs at C speed.

What follows the sources:
- insert: the tenant is added to every node on the path; a node it was added to without ending
  there gets stamp 0 (the sources' "intermediate - no timestamp update"); the node where the
  prompt ends (a new leaf, or an existing node) gets a fresh stamp from one global counter. A
  split node copies the tenants and stamps of the node it splits, and its cached tenant.
- per-tenant size = the label lengths of the nodes it is on (characters, or tokens here).
- prefix match: walk while a child's label shares a prefix with what is left; a partial match
  still counts its shared part and stops there. The tenant returned is the node's cached
  `last_tenant` (set to the creator of the node, copied on a split) if that tenant is still on
  the node, else the first tenant on it (the sources take DashMap's first, an arbitrary one;
  here: the first added, so that a run is reproducible), which then becomes the cached one.
  (With that fallback the cached tenant is always the first-added tenant still on the node:
  the creator while it stays, then the oldest remaining one.)
  One match in eight (by the global counter) refreshes the tenant's stamp on that node.
- eviction by size: every leaf of every tenant goes in a min-heap by stamp; popping, a tenant
  at or under the limit is skipped, otherwise the tenant leaves the node (its size drops by the
  label length), an empty node leaves the tree, and a parent left without that tenant below it
  becomes a leaf of it and joins the heap.
"""
from __future__ import annotations

import heapq
from typing import Iterable


class Node:
    __slots__ = ("children", "label", "tenants", "parent", "last_tenant")

    def __init__(self, label, parent, tenants: dict, last_tenant):
        self.children: dict = {}
        self.label = label
        self.tenants: dict = tenants          # tenant -> last-access stamp
        self.parent = parent
        self.last_tenant = last_tenant


def shared_prefix_len(key, pos: int, label) -> int:
    """How many leading elements of `label` equal key[pos:]; slices compared in C, the
    mismatch found by halving."""
    n = min(len(label), len(key) - pos)
    if key[pos:pos + n] == label[:n]:
        return n
    lo, hi = 0, n - 1          # key[pos:pos+lo] matches; a mismatch lies before n
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if key[pos:pos + mid] == label[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class RadixTree:
    """A multi-tenant approximate radix tree (tenants are replica indexes here)."""

    def __init__(self, empty=()):
        self.empty = empty                      # () for token keys, "" for text keys
        self.root = Node(empty, None, {}, None)
        self.size: dict = {}                    # tenant -> elements held (tokens or characters)
        self.epoch = 0                          # the sources' global counter for LRU stamps
        self.version = 0                        # bumped by every insert and eviction (insert_walked's check)
        self.shape = 0                          # bumped by every split and eviction (match_on's check)

    def _tick(self) -> int:
        e = self.epoch
        self.epoch = e + 1
        return e

    def add_tenant(self, tenant) -> None:
        """What the routers do for each worker at start-up (insert of the empty text)."""
        self.root.tenants.setdefault(tenant, 0)
        self.size.setdefault(tenant, 0)

    def insert(self, key, tenant) -> None:
        self.insert_walked(key, tenant, self.match(key))

    def insert_walked(self, key, tenant, walk, base: int = 0) -> None:
        """Insert key for tenant, given what match(key) returned while the tree was as it is now
        (the same version; cache_aware's route matched it): the nodes the walk reached get the
        tenant, an edge it stopped inside is split there, and the rest of the key is a new leaf.
        Every node it passes gets stamp 0, the node where the key ends a fresh one. `base`: key
        holds the elements from there on (match_on's walk, which passed all before it)."""
        self.version += 1
        root = self.root
        root.tenants.setdefault(tenant, 0)
        size = self.size
        size.setdefault(tenant, 0)
        node = root
        pos = 0
        for child, depth in walk[2]:
            label = child.label
            shared = depth - pos
            if shared < len(label):   # the walk stopped inside this edge: split it there
                self.shape += 1
                mid = Node(label[:shared], node, dict(child.tenants), child.last_tenant)
                child.label = label[shared:]
                child.parent = mid
                mid.children[child.label[0]] = child
                node.children[label[0]] = mid
                child = mid
            if tenant not in child.tenants:
                size[tenant] += shared
                child.tenants[tenant] = 0
            node = child
            pos = depth
        n = base + len(key)
        if pos < n:
            node.children[key[pos - base]] = Node(key[pos - base:], node, {tenant: self._tick()}, tenant)
            size[tenant] += n - pos
            return
        node.tenants[tenant] = self._tick()

    def match(self, key):
        """(matched elements, the deepest node reached, the path walked as (node, depth) pairs).
        No side effects: the sources' stamp refresh is done by `owner`, which knows the tenant."""
        return self._walk(key, 0, self.root, 0, [])

    def match_on(self, walk, key, base: int):
        """match(prefix + key), given walk = match(prefix) that matched all `base` elements of the
        prefix while the tree had its present shape (no split or eviction since): the prefix is
        not compared again. The walk is not changed."""
        _, node, path = walk
        path = list(path)
        pos = base
        if path:
            child, depth = path[-1]
            start = path[-2][1] if len(path) > 1 else 0
            label = child.label
            k = depth - start
            if k < len(label):   # the prefix ended inside this edge: the key goes on along it
                more = label[k:]
                m = len(more)
                if key[:m] == more:
                    pos = start + len(label)
                    path[-1] = (child, pos)
                else:   # the whole key's walk stops inside this edge
                    path[-1] = (child, base + shared_prefix_len(key, 0, more))
                    return path[-1][1], child, path
        return self._walk(key, base, node, pos, path)

    @staticmethod
    def _walk(key, base: int, node, pos: int, path: list):
        """match's walk from `node` at depth `pos`; key[i] is element base + i."""
        n = base + len(key)
        while pos < n:
            i = pos - base
            child = node.children.get(key[i])
            if child is None:
                break
            label = child.label
            ll = len(label)
            if key[i:i + ll] == label:
                pos += ll
                node = child
                path.append((child, pos))
                continue
            pos += shared_prefix_len(key, i, label)
            node = child
            path.append((child, pos))
            break
        return pos, node, path

    def owner(self, node, touch: bool = True):
        """The tenant the routers answer for `node`: its cached last tenant while that one is
        still on it, else the first one on it (which becomes the cached one); None if none."""
        t = node.last_tenant
        if t is None or t not in node.tenants:
            t = next(iter(node.tenants), None)
            node.last_tenant = t
        if touch:
            e = self._tick()
            if t is not None and (e & 7) == 0 and t in node.tenants:
                node.tenants[t] = e
        return t

    @staticmethod
    def matched_per_tenant(path, n_tenants: int) -> list:
        """Per tenant (0..n_tenants-1), how many leading elements its part of the tree matches:
        the depth of the deepest node of the path it is on (a tenant on a node is on all of the
        node's ancestors, so this is its own longest match)."""
        out = [0.0] * n_tenants
        for node, depth in path:
            d = float(depth)
            for t in node.tenants:
                if t < n_tenants:
                    out[t] = d
        return out

    def evict_by_size(self, max_size: int) -> int:
        """Evict LRU leaves of every tenant over `max_size` until it is at or under it; the
        number of (node, tenant) entries removed."""
        size = self.size
        if not any(v > max_size for v in size.values()):
            return 0
        heap = []
        seq = 0
        stack = [self.root]
        while stack:
            node = stack.pop()
            below: set = set()
            for child in node.children.values():
                stack.append(child)
                below.update(child.tenants)
            for t, stamp in node.tenants.items():
                if t not in below:
                    heap.append((stamp, seq, t, node))
                    seq += 1
        heapq.heapify(heap)
        self.version += 1
        self.shape += 1
        removed = 0
        while heap:
            _, _, t, node = heapq.heappop(heap)
            if size.get(t, 0) <= max_size:
                continue
            if t not in node.tenants or any(t in c.tenants for c in node.children.values()):
                continue
            size[t] = max(0, size[t] - len(node.label))
            del node.tenants[t]
            removed += 1
            parent = node.parent
            if parent is None:
                continue
            if not node.children and not node.tenants and len(node.label):
                if parent.children.get(node.label[0]) is node:
                    del parent.children[node.label[0]]
            if t in parent.tenants and not any(t in c.tenants for c in parent.children.values()):
                heapq.heappush(heap, (parent.tenants[t], seq, t, parent))
                seq += 1
        return removed

    def remove_tenant(self, tenant) -> None:
        """Drop a tenant everywhere (a worker removed)."""
        self.version += 1
        self.shape += 1
        stack = [self.root]
        while stack:
            node = stack.pop()
            stack.extend(node.children.values())
            node.tenants.pop(tenant, None)
        self._prune(self.root)
        self.size.pop(tenant, None)

    def _prune(self, node) -> None:
        for k, child in list(node.children.items()):
            self._prune(child)
            if not child.children and not child.tenants:
                del node.children[k]

    # for tests and pages
    def node_count(self) -> int:
        count, stack = 0, [self.root]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count

    def tenants_of(self, key) -> Iterable:
        """The tenants on the deepest node matching all of `key` (empty if it is not all there)."""
        matched, node, _ = self.match(key)
        return tuple(node.tenants) if matched == len(key) else ()
