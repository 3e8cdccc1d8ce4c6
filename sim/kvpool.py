"""A paged KV block pool with vLLM v1's semantics (BlockPool + prefix cache).

What matters for faithfulness (shared/vllm/README.md, "Block accounting"):
- block 0 is the null block, taken from the free queue at start and never handed out (from vLLM
  0.8.3; before it, every block could be handed out: `null_block` False);
- new blocks come from the head of the free queue; a reused block that still carries a
  prefix hash is evicted from the cache first;
- a request's blocks are released tail block first (vLLM 0.8 without prefix caching: head first,
  `tail_first` False); blocks without a hash go to the front
  of the queue (reused first), hashed ones to the back (evicted last, LRU); up to vLLM 0.23
  every released block went to the back (`uncached_first` False);
- a cache hit on a block nobody holds takes it out of the free queue.

Every ownership change is logged (step, block, request, op) so a page can rebuild the
block map at any step without re-running the scheduler.
"""
from __future__ import annotations

from array import array
from collections import OrderedDict
from itertools import repeat

import numpy as np

# ops in the change log
ACQUIRE = 1  # request starts holding the block (new allocation or prefix-cache hit)
RELEASE = 2  # request stops holding it
HASHED = 3  # block's content becomes a reusable cached prefix
EVICTED = 4  # block loses its hash (reused for something else)

OP_NAMES = {ACQUIRE: "acquire", RELEASE: "release", HASHED: "cached", EVICTED: "evicted"}


class BlockPool:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = False,
                 uncached_first: bool = True, null_block: bool = True, tail_first: bool = True):
        if num_blocks < 2:
            raise ValueError("need at least 2 blocks (block 0 is the null block)")
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.enable_caching = bool(enable_caching)
        self.uncached_first = bool(uncached_first)
        self.tail_first = bool(tail_first) or self.enable_caching   # 0.8 reverses only with caching
        self.preallocate = 0   # blocks handed out beyond the need (grant())
        self.max_blocks = 0    # a request's most blocks (its max_model_len's worth), where preallocating
        self.ref_cnt = [0] * self.num_blocks
        self.block_hash: list[int | None] = [None] * self.num_blocks
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(self.num_blocks))
        self.null_block = self._free.popitem(last=False)[0] if null_block else None
        self._cached: dict[int, dict[int, None]] = {}  # hash -> blocks carrying it, oldest first
        self.num_cached_free = 0  # free blocks that still carry a hash (evictable cache)
        # called (hash, True) when a hash comes into the cache, (hash, False) when its last block
        # leaves it: vLLM's KV events (BlockStored / BlockRemoved), which a fleet's index follows
        self.on_cache_change = None
        self.step = 0
        self.logging = True   # off: no change log (a run that only wants metrics)
        # change log: parallel typed arrays (4 bytes a value; a long run logs tens of millions of
        # changes), request ids as codes into log_names, numbered as first logged
        self.kv_step, self.kv_block, self.kv_req, self.kv_op = array("i"), array("i"), array("i"), array("b")
        self._log_code: dict[str, int] = {}
        self.log_names: list[str] = []

    @classmethod
    def for_rules(cls, rules, config, max_model_len: int) -> "BlockPool":
        """The pool a vLLM version's KV cache manager keeps: `rules` a sim.versions.Rules, `config` a
        SchedulerConfig."""
        caching = bool(config.enable_prefix_caching)
        uncached_first = rules.uncached_blocks_reused_first and (caching or rules.uncached_first_without_caching)
        pool = cls(config.num_gpu_blocks, config.block_size, caching, null_block=rules.null_block,
                   uncached_first=uncached_first, tail_first=rules.tail_first_without_caching)
        # up to 0.8.4 a request that needs a block takes this many more, up to its max_model_len's
        # worth (kv_cache_manager.py num_preallocate_blocks)
        pool.preallocate = -(-rules.preallocate_tokens // pool.block_size)
        pool.max_blocks = -(-int(max_model_len) // pool.block_size)
        return pool

    def grant(self, needed: int, held: int) -> int:
        """How many blocks to hand a request that needs `needed` more and holds `held`: with
        preallocation as many more as are free, up to its max_model_len's worth (only the needed
        ones had to fit: vLLM 0.8.4 kv_cache_manager.py:229, :254-263)."""
        if not self.preallocate:
            return needed
        return min(needed + self.preallocate, len(self._free), self.max_blocks - held)

    # -- queries ---------------------------------------------------------------
    @property
    def num_free(self) -> int:
        return len(self._free)

    # -- the change log ----------------------------------------------------------
    def _code(self, rid: str) -> int:
        c = self._log_code.get(rid)
        if c is None:
            c = self._log_code[rid] = len(self.log_names)
            self.log_names.append(rid)
        return c

    def _log_many(self, blocks: list[int], rid: str, op: int) -> None:
        if self.logging:
            n = len(blocks)
            if n == 1:   # most calls (a decode step's new block): plain appends cost less than extends
                self.kv_step.append(self.step)
                self.kv_block.append(blocks[0])
                self.kv_req.append(self._code(rid))
                self.kv_op.append(op)
                return
            self.kv_step.extend(repeat(self.step, n))
            self.kv_block.extend(blocks)
            self.kv_req.extend(repeat(self._code(rid), n))
            self.kv_op.extend(repeat(op, n))

    @property
    def log_len(self) -> int:
        return len(self.kv_step)

    def log_rows(self, start: int = 0, stop: int | None = None) -> list[tuple[int, int, str, int]]:
        """Changes start..stop of the log as (step, block, request id, op) tuples."""
        names = self.log_names
        return [(s, b, names[r], o) for s, b, r, o in zip(self.kv_step[start:stop], self.kv_block[start:stop],
                                                          self.kv_req[start:stop], self.kv_op[start:stop])]

    @property
    def log_step(self) -> list[int]:
        return list(self.kv_step)

    @property
    def log_block(self) -> list[int]:
        return list(self.kv_block)

    @property
    def log_req(self) -> list[str]:
        names = self.log_names
        return [names[r] for r in self.kv_req]

    @property
    def log_op(self) -> list[int]:
        return list(self.kv_op)

    def log_columns(self, take: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
        """The log as numpy columns (step, block, request code, op) and the codes' ids. take: hand
        the arrays over without a copy and start an empty log (a finished run's last read)."""
        cols = (self.kv_step, self.kv_block, self.kv_req, self.kv_op)
        dtypes = (np.int32, np.int32, np.int32, np.int8)
        names = list(self.log_names)
        if take:
            self.kv_step, self.kv_block, self.kv_req, self.kv_op = array("i"), array("i"), array("i"), array("b")
            return (*(np.frombuffer(c, dtype=t) if len(c) else np.zeros(0, dtype=t) for c, t in zip(cols, dtypes)),
                    names)
        return (*(np.array(c, dtype=t) for c, t in zip(cols, dtypes)), names)

    def cached_prefix(self, hashes: list[int], num_tokens: int) -> list[int]:
        """Blocks of the longest cached prefix; the hit is capped at num_tokens - 1 tokens
        (the last token must be computed to sample from it), rounded down to whole blocks."""
        out = []
        for h in hashes[: (num_tokens - 1) // self.block_size]:
            blocks = self._cached.get(h)
            if not blocks:
                break
            out.append(next(iter(blocks)))
        return out

    def cached_run(self, hashes) -> int:
        """How many of `hashes`, from the first, have a block carrying them: what a router that
        reads the cache (llm-d's precise scorer, Dynamo's indexer) sees of a prompt here."""
        n = 0
        cached = self._cached
        for h in hashes:
            if not cached.get(h):
                break
            n += 1
        return n

    def evictable(self, blocks: list[int]) -> int:
        return sum(1 for b in blocks if self.ref_cnt[b] == 0)

    # -- changes ---------------------------------------------------------------
    def touch(self, blocks: list[int], rid: str) -> None:
        """Take prefix-cache hits: free cached blocks leave the free queue."""
        ref_cnt = self.ref_cnt
        for b in blocks:
            if ref_cnt[b] == 0:
                del self._free[b]
                self.num_cached_free -= 1
            ref_cnt[b] += 1
        if blocks:   # logged in one go: a hit on a shared prompt is tens of blocks
            self._log_many(blocks, rid, ACQUIRE)

    def allocate(self, n: int, rid: str) -> list[int]:
        if n > len(self._free):
            raise RuntimeError(f"allocate {n} blocks with {len(self._free)} free")
        out, evicted = [], []
        for _ in range(n):
            b = self._free.popitem(last=False)[0]
            h = self.block_hash[b]
            if h is not None:  # reusing a cached block evicts its prefix
                holders = self._cached[h]
                del holders[b]
                if not holders:
                    del self._cached[h]
                    if self.on_cache_change is not None:
                        self.on_cache_change(h, False)
                self.block_hash[b] = None
                self.num_cached_free -= 1
                evicted.append(b)
            self.ref_cnt[b] = 1
            out.append(b)
        if evicted:   # the evictions, then the acquisitions: the log's order as it always was
            self._log_many(evicted, "", EVICTED)
        self._log_many(out, rid, ACQUIRE)
        return out

    def free(self, blocks: list[int], rid: str) -> None:
        """Release a request's blocks, tail first (vLLM frees them in reverse order; 0.8 without
        caching in their own)."""
        front = []
        order = blocks[::-1] if self.tail_first else blocks
        self._log_many(order, rid, RELEASE)
        for b in order:
            self.ref_cnt[b] -= 1
            if self.ref_cnt[b] == 0:
                if self.block_hash[b] is None:
                    if self.uncached_first:
                        front.append(b)
                    else:   # <= 0.23: to the back, as every block is (block_pool.py free_blocks)
                        self._free[b] = None
                else:
                    self._free[b] = None  # hashed: back of the queue, evicted last
                    self.num_cached_free += 1
        for b in reversed(front):  # unhashed: to the front, in release order
            self._free[b] = None
            self._free.move_to_end(b, last=False)

    def cache(self, blocks: list[int], hashes: list[int], start: int, stop: int, rid: str) -> None:
        """Mark blocks[start:stop] (now full of computed-or-scheduled tokens) as cached."""
        block_hash, cached, done = self.block_hash, self._cached, []
        for i in range(start, stop):
            b = blocks[i]
            if block_hash[b] is not None:
                continue
            h = hashes[i]
            block_hash[b] = h
            holders = cached.get(h)
            if holders is None:
                holders = cached[h] = {}
                if self.on_cache_change is not None:
                    self.on_cache_change(h, True)
            holders[b] = None
            done.append(b)
        if done:   # logged in one go, in the order they were cached
            self._log_many(done, rid, HASHED)

    def check(self) -> None:
        """Internal consistency (used by property tests)."""
        first = 0 if self.null_block is None else 1
        held = sum(1 for b in range(first, self.num_blocks) if self.ref_cnt[b] > 0)
        assert held + len(self._free) == self.num_blocks - first, (held, len(self._free))
        assert all(self.ref_cnt[b] == 0 for b in self._free)
        assert self.num_cached_free == sum(1 for b in self._free if self.block_hash[b] is not None)


class SwapSpace:
    """CPU memory that holds swapped-out KV blocks, with byte accounting."""

    def __init__(self, capacity_bytes: float, bytes_per_block: float):
        self.capacity_bytes = float(capacity_bytes)
        self.bytes_per_block = float(bytes_per_block)
        self.held: dict[str, int] = {}

    @property
    def used_bytes(self) -> float:
        return sum(self.held.values()) * self.bytes_per_block

    def can_hold(self, num_blocks: int) -> bool:
        return self.used_bytes + num_blocks * self.bytes_per_block <= self.capacity_bytes

    def swap_out(self, rid: str, num_blocks: int) -> float:
        self.held[rid] = num_blocks
        return num_blocks * self.bytes_per_block

    def swap_in(self, rid: str) -> float:
        return self.held.pop(rid) * self.bytes_per_block
