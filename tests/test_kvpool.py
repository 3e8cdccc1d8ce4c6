"""BlockPool: vLLM's free-queue order, prefix hashing and eviction."""
import pytest

from sim.kvpool import BlockPool, SwapSpace


def test_null_block_and_lifo_reuse():
    p = BlockPool(6, 4)
    assert p.null_block == 0 and p.num_free == 5
    a = p.allocate(3, "a")
    assert a == [1, 2, 3]
    p.free(a, "a")  # tail first, unhashed -> front: 3 is released first and ends up... behind 2 and 1
    assert p.num_free == 5
    nxt = p.allocate(3, "b")
    assert sorted(nxt) == [1, 2, 3]  # freed unhashed blocks are reused before never-used ones
    p.check()


def test_hashed_blocks_go_to_the_back_and_are_evicted_last():
    p = BlockPool(6, 4, enable_caching=True)
    a = p.allocate(2, "a")
    p.cache(a, [111, 222], 0, 2, "a")
    p.free(a, "a")
    assert p.num_cached_free == 2
    b = p.allocate(3, "b")  # the 3 never-used blocks come first
    assert set(b) == {3, 4, 5}
    assert p.cached_prefix([111, 222], 9) == a  # both still cached
    c = p.allocate(1, "c")  # now a cached block must be evicted: the tail block (freed first)
    assert c == [a[1]]
    assert p.cached_prefix([111, 222], 9) == [a[0]]
    p.check()


def test_hit_capped_below_last_token():
    p = BlockPool(8, 4, enable_caching=True)
    a = p.allocate(2, "a")
    p.cache(a, [1, 2], 0, 2, "a")
    assert len(p.cached_prefix([1, 2], 8)) == 1  # 8 tokens fully cached: hit capped at 7 -> 1 block
    assert len(p.cached_prefix([1, 2], 9)) == 2


def test_touch_takes_free_cached_block_out_of_queue():
    p = BlockPool(5, 4, enable_caching=True)
    a = p.allocate(1, "a")
    p.cache(a, [9], 0, 1, "a")
    p.free(a, "a")
    free_before = p.num_free
    p.touch(a, "b")
    assert p.num_free == free_before - 1 and p.ref_cnt[a[0]] == 1
    p.touch(a, "c")  # shared: ref 2, no change in free count
    assert p.ref_cnt[a[0]] == 2 and p.num_free == free_before - 1
    p.free(a, "b")
    p.free(a, "c")
    assert p.num_free == free_before
    p.check()


def test_over_allocation_raises():
    p = BlockPool(3, 4)
    with pytest.raises(RuntimeError):
        p.allocate(3, "x")


def test_swap_space_accounting():
    s = SwapSpace(capacity_bytes=10 * 1024, bytes_per_block=1024)
    assert s.can_hold(10) and not s.can_hold(11)
    assert s.swap_out("a", 6) == 6 * 1024
    assert s.used_bytes == 6 * 1024 and not s.can_hold(5)
    assert s.swap_in("a") == 6 * 1024 and s.used_bytes == 0


def test_change_log_records_owners():
    p = BlockPool(4, 2)
    p.step = 3
    a = p.allocate(2, "a")
    p.step = 4
    p.free(a, "a")
    assert p.log_step == [3, 3, 4, 4]
    assert p.log_req == ["a"] * 4
    assert p.log_block[2:] == a[::-1]  # released tail first


def test_the_change_log_keeps_every_change_in_order():
    """Each block's change is one row, in the order the changes happened, whether a call logs one
    block or many: hits, caching, a release tail first, evictions before the acquisitions that
    caused them; request codes numbered as first logged."""
    from sim.kvpool import ACQUIRE, EVICTED, HASHED, RELEASE
    p = BlockPool(5, 4, enable_caching=True)
    a = p.allocate(2, "a")
    p.step = 1
    p.cache(a, [11, 22], 0, 2, "a")
    p.step = 2
    p.touch(a, "b")
    p.step = 3
    p.free(a, "a")
    p.free(a, "b")
    p.step = 4
    p.cache(a, [11, 22], 0, 2, "a")   # already cached: nothing logged
    c = p.allocate(4, "c")            # the two never-used blocks, then the cached ones, evicted
    assert (a, c) == ([1, 2], [3, 4, 2, 1])
    assert p.log_rows() == [
        (0, 1, "a", ACQUIRE), (0, 2, "a", ACQUIRE),
        (1, 1, "a", HASHED), (1, 2, "a", HASHED),
        (2, 1, "b", ACQUIRE), (2, 2, "b", ACQUIRE),
        (3, 2, "a", RELEASE), (3, 1, "a", RELEASE), (3, 2, "b", RELEASE), (3, 1, "b", RELEASE),
        (4, 2, "", EVICTED), (4, 1, "", EVICTED),
        (4, 3, "c", ACQUIRE), (4, 4, "c", ACQUIRE), (4, 2, "c", ACQUIRE), (4, 1, "c", ACQUIRE)]
    assert p.log_names == ["a", "b", "", "c"]
    p.check()
