"""The routing loop's text of a request's own ids, written for a batch of requests at once."""
from __future__ import annotations

import numpy as np

from sim.fleet.prompts import _written_vocab, written_ids


def test_ids_written_for_a_batch_are_each_requests_text():
    """written_ids (a batch of own ids written in one numpy pass) cuts to _written_vocab's text."""
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 32000, 3000).astype(np.uint32)
    ids[:8] = [0, 9, 10, 99, 100, 999, 1000, 31999]
    bounds = [0, 1, 8, 8, 150, 2999, 3000]   # an empty span too
    text, starts = written_ids(ids, bounds)
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        if b > a:
            assert text[starts[i]:starts[i + 1] - 1] == _written_vocab(ids[a:b].tolist()).encode()
    assert written_ids(np.array([100000], dtype=np.uint32), [0, 1]) is None
