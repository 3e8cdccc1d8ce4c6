"""vllm-router's `consistent_hash` policy: a hash ring keyed by a session or request key.

vllm-project/router `src/policies/consistent_hash.rs`: 160 virtual nodes per worker, the ring
position of virtual node i of a worker is `fbi_hash("{url}:{i}")` (a later insert at the same
position wins, as in its BTreeMap), a key goes to the first ring entry at or after
`fbi_hash(key)`, wrapping round to the smallest. `fbi_hash` is mcrouter's FurcHash (23-bit
modulus) of the key, widened to 64 bits by MurmurHash64A of the 4 little-endian bytes, seed
4193360111. Both hashes are written out below from that file (no Python `hash()`, which is
randomised per process), so a ring is the same in every process. MurmurHash64A gives the
published test vectors; FurcHash gives facebook/mcrouter's own test values except where
vllm-router's port differs from mcrouter's hash.c: the port tests `d == 0` before decrementing
(C: `if (--d == 0) return 0`), so when every bit it examines is 0 it looks at bit 0 once more
and may return 1 where mcrouter returns 0. That is followed here (it is what the router runs);
with the ring's 23-bit modulus it needs 22 zero bits in a row, about one key in four million.

The key, as `src/policies/hash_key.rs` forms it from the first request header present
(x-session-id, x-user-id, x-tenant-id, x-correlation-id, x-request-id, x-trace-id):
`header:x-tenant-id:<tenant>` for key "tenant" (Request.tenant), `header:x-request-id:<id>`
for key "request" (Request.id; the fleet kit's fleet_drive sends a unique X-Request-Id, so
the real router spreads per request). Workers are named by URL as on the router's command
line: `url_format` with {port} = base_port + index (the kit's replicas are 127.0.0.1:8101..),
so that a simulated ring can equal a real one.
"""
from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache
from string import Formatter

from ...limits import shown
from ..routing import Decision, Router, register_router

_M = 0xC6A4A7935BD1E995
_R = 47
_MASK = (1 << 64) - 1
_SEED = 4193360111
_FURC_SHIFT = 23
_FURC_MAX_TRIES = 32
_LARGE_MODULUS = (1 << 23) - 1
VIRTUAL_NODES_PER_WORKER = 160
MAX_VIRTUAL_NODES = 10_000   # a ring of 1,024 replicas x this takes seconds to build: a bound on the work


def murmur_hash_64a(key: bytes, seed: int) -> int:
    """MurmurHash64A (mcrouter lib/fbi/hash.c, as ported in vllm-router consistent_hash.rs)."""
    n = len(key)
    h = (seed ^ ((n * _M) & _MASK)) & _MASK
    end = n - (n & 7)
    for i in range(0, end, 8):
        k = int.from_bytes(key[i:i + 8], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    rem = key[end:]
    if rem:
        h ^= int.from_bytes(rem, "little")
        h = (h * _M) & _MASK
    h ^= h >> _R
    h = (h * _M) & _MASK
    h ^= h >> _R
    return h


def _murmur_rehash_64a(k: int) -> int:
    h = (_SEED ^ ((8 * _M) & _MASK)) & _MASK
    k = (k * _M) & _MASK
    k ^= k >> _R
    k = (k * _M) & _MASK
    h ^= k
    h = (h * _M) & _MASK
    h ^= h >> _R
    h = (h * _M) & _MASK
    h ^= h >> _R
    return h


def furc_hash(key: str, m: int) -> int:
    """FurcHash: a consistent hash of `key` into [0, m)."""
    if m <= 1:
        return 0
    data = key.encode()
    cache: list[int] = []

    def bit(idx: int) -> int:
        o = idx >> 6
        while len(cache) <= o:
            cache.append(murmur_hash_64a(data, _SEED) if not cache else _murmur_rehash_64a(cache[-1]))
        return (cache[o] >> (idx & 63)) & 1

    d = 0
    while m > (1 << d):
        d += 1
    a = d
    for _ in range(_FURC_MAX_TRIES):
        while not bit(a):
            if d == 0:
                return 0
            d -= 1
            a = d
        a += _FURC_SHIFT
        num = 1
        for _ in range(max(d - 1, 0)):
            num = (num << 1) | bit(a)
            a += _FURC_SHIFT
        if num < m:
            return num
    return 0


def fbi_hash(key: str) -> int:
    """vllm-router's ring hash: FurcHash into 23 bits, then MurmurHash64A of its 4 bytes."""
    return murmur_hash_64a(furc_hash(key, _LARGE_MODULUS).to_bytes(4, "little"), _SEED)


@lru_cache(maxsize=32)
def build_ring(urls: tuple[str, ...], virtual_nodes: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(sorted positions, worker index at each): what the sources' BTreeMap holds."""
    ring: dict[int, int] = {}
    for w, url in enumerate(urls):
        for i in range(virtual_nodes):
            ring[fbi_hash(f"{url}:{i}")] = w
    pos = tuple(sorted(ring))
    return pos, tuple(ring[p] for p in pos)


@register_router("consistent_hash")
class ConsistentHash(Router):
    """vllm-router `consistent_hash` (see the module text). Decision.detail gives the key and
    its 64-bit hash; every worker is a candidate."""

    reads_fleet = False   # its pick depends on the request alone

    defaults = {"key": "tenant", "virtual_nodes": VIRTUAL_NODES_PER_WORKER,
                "url_format": "http://127.0.0.1:{port}", "base_port": 8101}
    KEYS = ("tenant", "request")

    @classmethod
    def validate(cls, config):
        if config["key"] not in cls.KEYS:
            raise ValueError(f"router consistent_hash setting key must be tenant or request, not {config['key']!r}")
        if not 1 <= config["virtual_nodes"] <= MAX_VIRTUAL_NODES:
            raise ValueError(f"router consistent_hash setting virtual_nodes must be from 1 to {MAX_VIRTUAL_NODES:,} "
                             f"(vllm-router's is {VIRTUAL_NODES_PER_WORKER}), not {config['virtual_nodes']:,}")
        fmt = config["url_format"]
        try:   # plain {port} and {i} only: a format spec or an attribute could ask for anything
            plain = all(f is None or (f in ("port", "i") and not spec and conv is None)
                        for _, f, spec, conv in Formatter().parse(fmt))
        except ValueError:
            plain = False
        if not plain:
            raise ValueError("router consistent_hash setting url_format may name only {port} and {i}, as they "
                             f"are, not {shown(fmt)}")

    def __init__(self, num_replicas, config=None, seed=0):
        super().__init__(num_replicas, config, seed)
        c = self.config
        fmt, base = c["url_format"], int(c["base_port"])
        self.urls = tuple(fmt.format(port=base + i, i=i) for i in range(self.n))
        self.positions, self.owners = build_ring(self.urls, int(c["virtual_nodes"]))
        self.by_tenant = c["key"] == "tenant"
        self._memo: dict[str, tuple[int, int]] = {}

    def key_of(self, request) -> str:
        if self.by_tenant:
            return f"header:x-tenant-id:{request.tenant}"
        return f"header:x-request-id:{request.id}"

    def lookup(self, key: str) -> tuple[int, int]:
        hit = self._memo.get(key)
        if hit is None:
            h = fbi_hash(key)
            j = bisect_left(self.positions, h)
            hit = (self.owners[j if j < len(self.owners) else 0], h)
            if len(self._memo) > 100_000:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def route(self, request, ctx):
        key = self.key_of(request)
        i, h = self.lookup(key)
        return Decision(i, "hash_ring", tuple(range(self.n)), {}, {"key": key, "hash": h})
