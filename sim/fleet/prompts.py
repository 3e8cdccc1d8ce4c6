"""What the routers read of a prompt, made once per shared prefix: chain hashes (vLLM's block
hasher), text and its hashes (GIE's approximate prefix index), token ids as one array, split into
the prompt blocks' pieces every request with those blocks shares and the request's own rest.

`_Prompts` is the routing loop's view of the requests' prompts (sim/fleet/fleet.py's RoutingLoop
asks it whatever its router needs); `_PrefixTree` keeps each prompt-block prefix's pieces, at
most PREFIX_TREE_NODES of them (then it starts again empty). Every answer equals the whole
prompt's (tests/fleet/test_prompt_memo.py).
"""
from __future__ import annotations

from array import array
from itertools import accumulate

import numpy as np

from ..workload import (PROMPT_BLOCK_TOKENS, VOCAB_SIZE, own_prompt_seed, own_prompt_tokens,
                        own_prompt_tokens_flat, prompt_block_tokens)


def chain_hashes(tokens: list[int], block_size: int, h: int = 0) -> list[int]:
    """Chain hashes of every full block (sim.scheduler.Seq.extend_hashes' rule), so that they
    match the keys of a replica's prefix cache. `h`: the hash the chain goes on from."""
    out = []
    for i in range(len(tokens) // block_size):
        h = hash((h, tuple(tokens[i * block_size:(i + 1) * block_size])))
        out.append(h)
    return out


def _chain_iter(tokens: list[int], block_size: int, h: int):
    """chain_hashes, one at a time."""
    for i in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[i:i + block_size])))
        yield h


def _chain_iter_array(carry: list[int], ids, block_size: int, h: int):
    """_chain_iter over carry + ids (a numpy array), each block's ids made into ints as it is
    hashed (a request's own ids: most walks read one block of them, or none)."""
    i = 0
    if carry:
        i = block_size - len(carry)
        if i > len(ids):
            return
        h = hash((h, tuple(carry + ids[:i].tolist())))
        yield h
    for i in range(i, len(ids) - block_size + 1, block_size):
        h = hash((h, tuple(ids[i:i + block_size].tolist())))
        yield h


def text_chain_hashes(text: str, block: int, max_blocks: int, seed: int) -> list[int]:
    """GIE's approximate prefix hashes of a prompt text (sim/fleet/routers/llmd.py Weighted): its
    UTF-8 bytes cut to `max_blocks` blocks of `block` bytes (a shorter tail dropped), chain-hashed
    after `seed`; [] when the text is shorter than one block."""
    data = text.encode()
    if len(data) < block:
        return []
    data = data[:block * max_blocks]
    h = seed
    out = [h]
    for i in range(0, len(data) - block + 1, block):
        h = hash((data[i:i + block], h))
        out.append(h)
    return out


class _TokenText(dict):
    """Token id -> its decimal text, made on first use (str() of 1,200 ids costs ~180 µs a
    prompt; looking them up, ~20)."""

    def __missing__(self, token: int) -> str:
        if len(self) >= 1 << 20:   # a vocabulary is far smaller; random ids must not grow it forever
            self.clear()
        text = self[token] = str(token)
        return text


_TOKEN_TEXT = _TokenText()


def _written(tokens) -> str:
    return " ".join(map(_TOKEN_TEXT.__getitem__, tokens))


_VOCAB_TEXT = [str(t) for t in range(VOCAB_SIZE)]   # a list reads faster than the dict (no key compare)


def _written_vocab(tokens) -> str:
    """_written for ids known to be in [0, VOCAB_SIZE) (those block_prompt_tokens makes)."""
    return " ".join(map(_VOCAB_TEXT.__getitem__, tokens))


def written_ids(ids: np.ndarray, bounds: list[int]) -> tuple[bytes, list[int]] | None:
    """Ids (each in [0, 100000)) written in decimal as _written_vocab writes them, each followed
    by a space, in a few numpy passes over all of them; `bounds`: where each span of ids starts,
    and the end. Returns (the bytes, where each span's text starts, and the end): span i is
    text[starts[i]:starts[i + 1] - 1]. None for an id past 99999."""
    if not len(ids):
        return b"", [0] * len(bounds)
    if int(ids.max()) >= 100000:
        return None
    v = ids.astype(np.int32)
    digits = _digit_counts(v)
    cells = np.empty((len(v), 6), dtype=np.uint8)   # five digits, right-aligned, and a space
    cells[:, 5] = ord(" ")
    for col in range(4, -1, -1):
        cells[:, col] = v % 10 + ord("0")
        v //= 10
    text = cells[np.arange(6) >= (5 - digits)[:, None]].tobytes()   # leading zeros left out
    ends = np.cumsum(digits + 1, dtype=np.int64)    # just past each id's space
    at = np.asarray(bounds, dtype=np.int64)
    starts = np.where(at > 0, ends[np.maximum(at, 1) - 1], 0)
    return text, starts.tolist()


def _digit_counts(v: np.ndarray) -> np.ndarray:
    """How many decimal digits each id (>= 0) of v takes, as int64."""
    digits = np.ones(len(v), dtype=np.int64)
    at, top = 10, int(v.max()) if len(v) else 0
    while at <= top:
        digits += v >= at
        at *= 10
    return digits


def _written_heads(ids: np.ndarray, bounds: list[int]) -> tuple[bytes, list[int]] | None:
    """The first HEAD_IDS ids of each span (all of a shorter one) written as written_ids writes
    them: (bytes, where each span's head starts); span i's own text begins with
    text[starts[i]:starts[i + 1] - 1]."""
    at = np.asarray(bounds, dtype=np.int64)
    take = np.minimum(np.diff(at), HEAD_IDS)
    cut = np.cumsum(take)
    index = np.repeat(at[:-1] - (cut - take), take) + np.arange(int(cut[-1]) if len(cut) else 0)
    return written_ids(ids[index], [0] + cut.tolist())


def written_lengths(ids: np.ndarray, bounds: list[int]) -> list[int]:
    """The length of each span's text as written_ids writes it (its ids' digits and a space
    between two), without writing it; `bounds` as written_ids' (every span holds an id)."""
    if not len(ids):
        return []
    counts = np.diff(np.asarray(bounds, dtype=np.int64))
    return (np.add.reduceat(_digit_counts(ids.astype(np.int64)), bounds[:-1]) + counts - 1).tolist()


class _Prefix:
    """A node of the tree of prompt-block prefixes: the prefix ending with prompt block `block`
    (PROMPT_BLOCK_TOKENS tokens, a pure function of its id). It keeps what is made of the prefix
    once, as its own piece on top of its parent's: per block size the chain hashes of the blocks
    that end inside it (and the tokens left over, with the hash to go on from); the block's text
    and array of ids; per text-hash rule the same for the text's bytes."""

    __slots__ = ("parent", "block", "depth", "children", "chains", "text_chains", "_tokens", "_text", "_array",
                 "fulls", "segs")

    def __init__(self, parent, block):
        self.parent = parent
        self.block = block
        self.depth = 0 if parent is None else parent.depth + 1
        self.children: dict = {}
        self.chains: dict = {}        # block size -> (hashes ending here, last hash, tokens left over)
        self.text_chains: dict = {}   # (block bytes, max blocks, seed) -> (hashes, last, bytes left, count)
        self._tokens = self._text = self._array = None
        self.fulls = None             # block size, text rule or "ids" -> the whole path's hashes or ids (where asked)
        self.segs = None              # block size -> (the path's pieces that hold a hash, their length in all)

    def path(self) -> list:
        """The nodes from the first block down to this one (the root left out)."""
        out, node = [], self
        while node.parent is not None:
            out.append(node)
            node = node.parent
        out.reverse()
        return out

    def kept(self) -> dict:
        """`fulls`, made on first use (most nodes are passed through, not ended at)."""
        fulls = self.fulls
        if fulls is None:
            fulls = self.fulls = {}
        return fulls

    def tokens(self) -> list[int]:
        if self._tokens is None:
            self._tokens = prompt_block_tokens(self.block)
        return self._tokens

    def text(self) -> str:
        if self._text is None:
            self._text = _written_vocab(self.tokens())
        return self._text

    def array(self):
        if self._array is None:
            self._array = array("I", self.tokens())
        return self._array

    def full_array(self):
        """The ids of the whole prefix as one array('I') (kept on this node only: the nodes
        requests end at; do not change it)."""
        fulls = self.kept()
        f = fulls.get("ids")
        if f is None:
            f = fulls["ids"] = array("I")
            for n in self.path():
                f += n.array()
        return f

    def chain(self, block_size: int) -> tuple:
        """(hashes of the blocks ending in this prompt block, the chain's last hash, the tokens
        after the last full block), made from the parent's (its own made first if need be)."""
        c = self.chains.get(block_size)
        if c is None:
            parent = self.parent
            if parent is None:
                c = ([], 0, [])
            else:
                _, h, carry = parent.chain(block_size)
                data = carry + self.tokens() if carry else self.tokens()
                piece = chain_hashes(data, block_size, h)
                c = (piece, piece[-1] if piece else h, data[len(piece) * block_size:])
            self.chains[block_size] = c
        return c

    def full_chain(self, block_size: int) -> list[int]:
        """The chain hashes of every block ending in the prefix, the first block's on (kept on
        this node only: the nodes requests end at; do not change the list)."""
        fulls = self.kept()
        f = fulls.get(block_size)
        if f is None:
            f = []
            for n in self.path():
                f += n.chain(block_size)[0]
            fulls[block_size] = f
        return f

    def pieces(self, block_size: int) -> tuple:
        """(the pieces of the path's nodes that hold a hash, first block's first; their hashes in
        all): the chain hashes of the prefix, cut where a prompt block ends (kept on this node)."""
        segs = self.segs
        if segs is None:
            segs = self.segs = {}
        got = segs.get(block_size)
        if got is None:
            pieces = [c for c in (n.chain(block_size)[0] for n in self.path()) if c]
            got = segs[block_size] = (pieces, sum(map(len, pieces)))
        return got

    def text_full(self, key: tuple) -> list[int]:
        """[seed] and the text hashes of every block ending in the prefix's text, for the rule
        `key` (kept on this node only: the nodes requests end at; do not change the list)."""
        fulls = self.kept()
        f = fulls.get(key)
        if f is None:
            f = [key[2]]
            for n in self.path():
                f += n.text_chain(key)[0]
            fulls[key] = f
        return f

    def text_chain(self, key: tuple) -> tuple:
        """(hashes of the text blocks ending in this prefix's text, the last hash, the bytes after
        the last full block, blocks so far) for the rule `key` = (block, max_blocks, seed)."""
        c = self.text_chains.get(key)
        if c is None:
            parent = self.parent
            if parent is None:
                c = ([], key[2], b"", 0)
            else:
                _, h, carry, count = parent.text_chain(key)
                block, max_blocks, _ = key
                if count >= max_blocks:   # the text past the first max_blocks blocks is not hashed
                    c = ([], h, b"", count)
                else:
                    data = carry + b" " + self.text().encode() if parent.parent is not None else self.text().encode()
                    piece = _chunk_hashes(data, block, max_blocks - count, h)
                    c = (piece, piece[-1] if piece else h, data[len(piece) * block:], count + len(piece))
            self.text_chains[key] = c
        return c


def _chunk_hashes(data: bytes, block: int, most: int, h: int) -> list[int]:
    """Chain hashes of the first (at most `most`) full `block`-byte blocks of data, after h."""
    out = []
    for i in range(0, min(len(data) // block, max(most, 0)) * block, block):
        h = hash((data[i:i + block], h))
        out.append(h)
    return out


class _OwnChain:
    """The chain hashes of a prompt's blocks past its whole prompt blocks (its own ids), made as
    they are asked for: the first alone (most walks stop there), the rest all at once. `made`: the
    whole list, when it is known already."""

    __slots__ = ("src", "_first", "_all")

    def __init__(self, block_size: int = 0, last: int = 0, carry=(), ids=(), made: list | None = None):
        self.src = (block_size, last, carry, ids)
        self._all = made
        self._first = made[0] if made else None

    def first(self):
        """The first hash, or None if there is none."""
        if self._first is None:
            if self._all is not None:
                return self._all[0] if self._all else None
            bs, last, carry, ids = self.src
            need = bs - len(carry)
            if len(ids) >= need:
                first = ids[:need] if isinstance(ids, list) else ids[:need].tolist()
                self._first = hash((last, tuple(carry + first if carry else first)))
        return self._first

    def all(self) -> list:
        if self._all is None:
            bs, last, carry, ids = self.src
            self._all = list(_chain_iter(carry + ids if carry else ids, bs, last) if isinstance(ids, list)
                             else _chain_iter_array(carry, ids, bs, last))
        return self._all

    def __iter__(self):
        first = self.first()
        if first is None:
            return
        yield first
        yield from self.all()[1:]   # made whole only if the walk goes past the first


class PromptSegments:
    """A prompt's chain hashes for one block size in pieces (RoutingLoop's ctx.prompt_segments),
    for a router that keeps sets of hashes (kv_cost's active blocks): a hash shared by many
    prompts comes in a piece that is the same list for all of them.
    - pieces: the prompt's whole prompt blocks' pieces (_Prefix.pieces): each is the hashes of
      the blocks ending in one prompt block; a piece is known by its last hash (that hash
      fixes the tokens before it, so the piece).
    - part, j: a last prompt block cut short: its piece as a whole block's, of which the prompt
      has the first j hashes (a piece of its own that other prompts share); else None, 0.
    - the hashes past those (the request's own ids; for a prompt not made of blocks, every
      hash): ntail of them, tail() makes them, first_tail() the first (made alone if need be).
    Their concatenation is the prompt's whole chain (tested against chain_hashes)."""

    __slots__ = ("pieces", "shared", "part", "j", "ntail", "n", "own")

    def __init__(self, pieces, shared: int, part, j: int, ntail: int, own: _OwnChain | None = None):
        self.pieces, self.shared, self.part, self.j, self.ntail = pieces, shared, part, j, ntail
        self.n = shared + j + ntail
        self.own = own

    def tail(self) -> list:
        return self.own.all() if self.ntail else []

    def first_tail(self):
        return self.own.first() if self.ntail else None

    def first_key(self):
        """What the first hash is known by: its piece's last hash, or the first tail hash."""
        if self.pieces:
            return self.pieces[0][-1]
        if self.part is not None:
            return self.part[-1]
        return self.first_tail()

    def hashes(self) -> list:
        out = []
        for p in self.pieces:
            out += p
        if self.part is not None:
            out += self.part[:self.j]
        if self.ntail:
            out += self.tail()
        return out


class _PrefixTree:
    """The prompt-block prefixes seen so far (a trie by block id), at most `capacity` nodes: past
    that it starts again empty (what it holds never changes a result, only how fast it comes).
    capacity 0: no tree (every request's prompt made whole, the reference)."""

    def __init__(self, capacity: int = 8192):
        self.capacity = capacity
        self.root = _Prefix(None, None)
        self.nodes = 0

    def node(self, blocks) -> _Prefix | None:
        """The node of prefix `blocks` (made if new), or None for a prefix longer than the tree
        may hold."""
        if len(blocks) > self.capacity:
            return None
        node = self.root
        for b in blocks:
            child = node.children.get(b)
            if child is None:
                if self.nodes >= self.capacity:
                    self.clear()
                    return self.node(blocks)
                child = node.children[b] = _Prefix(node, b)
                self.nodes += 1
            node = child
        return node

    def clear(self) -> None:
        self.root = _Prefix(None, None)
        self.nodes = 0


PREFIX_TREE_NODES = 8192   # the default capacity of a routing loop's prefix tree
OWN_BATCH = 256            # requests whose own ids are made together (one numpy pass)
# Bytes of two requests' own texts (past their shared prompt blocks) that agree only if their
# own ids come from one seed: 10 ids or more, of 2-5 digits and a space each (ids from other
# seeds agree that far with a chance below 1e-40 a pair).
OWN_TEXT_ALIKE = 64
HEAD_IDS = OWN_TEXT_ALIKE // 3 + 1   # ids whose text holds OWN_TEXT_ALIKE - 1 bytes or more (see _own_text_head)


class _Prompts:
    """The current request's prompt (token ids, text, chain hashes per block size), made once
    per decision and only if a router asks. A request named by prompt blocks (and no ids of its
    own) is made from the tree of block prefixes: the pieces of its whole blocks are made once
    for every request sharing them, and only the rest (a cut last block, or its own tokens past
    the blocks) is made for it. Its whole list of ids is made only if a router asks for it
    (else the replica makes it, from the same cached blocks)."""

    def __init__(self, capacity: int | None = None):
        self.tree = _PrefixTree(PREFIX_TREE_NODES if capacity is None else capacity)
        self.req = None
        self.tokens = None
        self.written = None
        self.hashes: dict[int, list[int]] = {}
        self.prefix = None   # (node of the request's whole blocks, tokens they cover, the ids after them), or False
        self.rest_list = None   # the ids after them as a list
        self.owns: dict = {}     # block size -> _OwnChain of the ids after them
        # the requests in the order they will be routed (plan), so that the own ids of the next
        # OWN_BATCH requests are made in one numpy pass
        self.order: list | None = None
        self.where: dict[int, int] = {}
        # the last batch: its ids (numpy), where each request's are in it, and their text once asked
        self.batch_ids = None
        self.batch_at: dict[int, int] = {}      # request's index in order -> its span in the batch
        self.batch_bounds: list[int] = []
        self.batch_text = None
        self.batch_text_lens = None
        self.batch_heads = None   # (bytes, starts): the first HEAD_IDS ids of each span written out
        self.own_at = None        # the decision's request's span in the last batch, if its own ids are there

    def plan(self, requests: list) -> None:
        """The requests in the order they will be routed (their own ids are then made in batches)."""
        self.order = list(requests)
        self.where = {id(r): i for i, r in enumerate(self.order)}
        self.forget_batch()

    def forget_batch(self) -> None:
        """Drop the last batch of own ids (the next request asked for starts a new one)."""
        self.batch_ids, self.batch_at, self.batch_bounds = None, {}, []
        self.batch_text = self.batch_text_lens = self.batch_heads = None
        self.own_at = None

    @staticmethod
    def _own_span(req):
        """(id, start, end) of the ids of `req` past its prompt blocks, if it is made of blocks
        and has some."""
        blocks = req.prompt_blocks
        if blocks is None or req.prompt_token_ids is not None:
            return None
        n = req.prompt_len
        start = len(blocks) * PROMPT_BLOCK_TOKENS
        return (req.id, start, n) if start < n else None

    def _planned(self, req) -> int | None:
        """req's index in the planned order, or None for a request not planned (an id() reused by
        another object does not count)."""
        i = self.where.get(id(req))
        return i if i is not None and self.order[i] is req else None

    def _own(self, req, start: int, end: int):
        """The request's own ids past its blocks: a uint32 array made ahead with the next
        OWN_BATCH planned requests' (one numpy pass), or a list made now for a request not planned."""
        i = self._planned(req)
        if i is None:
            return own_prompt_tokens(req.id, start, end)
        s = self.batch_at.get(i)
        if s is None:   # a new batch from this request on (the last one's ids are dropped)
            idx, spans = [], []
            for j in range(i, min(i + OWN_BATCH, len(self.order))):
                sp = self._own_span(self.order[j])
                if sp is not None:
                    idx.append(j)
                    spans.append(sp)
            flat, lens = own_prompt_tokens_flat(spans)
            self.forget_batch()
            self.batch_ids = flat.astype(np.uint32)   # ids < VOCAB_SIZE: the same values, as array('I') holds them
            self.batch_at = dict(zip(idx, range(len(idx))))
            self.batch_bounds = [0, *accumulate(lens)]
            s = self.batch_at.get(i)
            if s is None:
                return own_prompt_tokens(req.id, start, end)
        self.own_at = s
        b = self.batch_bounds
        return self.batch_ids[b[s]:b[s + 1]]

    def _own_text(self, req) -> bytes:
        """The ids after the request's whole prompt blocks written out, as
        _written_vocab(self.rest(req)).encode() gives them: for a request of the last batch, cut
        from its text (written for the whole batch at once when first asked). req: the decision's
        request, its prefix known."""
        got = self.own_at
        if got is not None:
            if self.batch_text is None:
                self.batch_text = written_ids(self.batch_ids, self.batch_bounds) or False
            if self.batch_text:
                text, starts = self.batch_text
                return text[starts[got]:starts[got + 1] - 1]
        return _written_vocab(self.rest(req)).encode()

    def _own_text_len(self, req) -> int:
        """len(self._own_text(req)), counted from the ids' digits (for the last batch, all of its
        requests' at once), the text not written. req: the decision's request, its prefix known."""
        got = self.own_at
        if got is not None and self.batch_text is None:
            lens = self.batch_text_lens
            return (self._batch_lens() if lens is None else lens)[got]
        return len(self._own_text(req))

    def _batch_lens(self) -> list[int]:
        """The length of each own text of the last batch (counted from the ids' digits, kept)."""
        self.batch_text_lens = written_lengths(self.batch_ids, self.batch_bounds)
        return self.batch_text_lens

    def _batch_heads(self) -> tuple[bytes, list[int]] | bool:
        """The first bytes of each own text of the last batch (_written_heads, kept; False if an
        id is past what written_ids writes)."""
        self.batch_heads = _written_heads(self.batch_ids, self.batch_bounds) or False
        return self.batch_heads

    def _own_text_head(self, req, size: int) -> bytes:
        """The first `size` bytes of _own_text(req) (there are that many, and at most
        OWN_TEXT_ALIKE - 1), only their ids written: for a request of the last batch, cut from its
        requests' first ids written at once. req: the decision's request, its prefix known."""
        s = self.own_at
        if s is not None:
            heads = self.batch_heads
            if heads is None:
                heads = self._batch_heads()
            if heads:
                text, starts = heads
                return text[starts[s]:starts[s] + size]
        ids = self.prefix[2][:size // 3 + 1]   # each id 2 digits or more, and a space
        return _written_vocab(ids if isinstance(ids, list) else ids.tolist()).encode()[:size]

    def rest(self, req) -> list[int]:
        """The ids after the request's whole prompt blocks, as a list (its prefix known)."""
        r = self.rest_list
        if r is None:
            r = self.prefix[2]
            r = self.rest_list = r if isinstance(r, list) else r.tolist()
        return r

    def replica_ids(self, req):
        """The ids a router asked for at this decision, as a tuple for the replica (so that it
        does not make them again), or None if none were asked for (the replica then makes them
        from the same cached blocks)."""
        if req is not self.req or req.prompt_token_ids is not None or self.tokens is None:
            return None
        return tuple(self.tokens)

    def reset(self, req) -> None:
        self.req, self.tokens, self.hashes, self.written, self.prefix, self.rest_list = req, None, {}, None, None, None
        self.owns = {}
        self.own_at = None

    def _prefix(self, req):
        """(node, tokens it covers, the ids after them) for a request made of prompt blocks, else
        None."""
        if req is not self.req:
            self.reset(req)
        p = self.prefix
        if p is None:
            blocks = req.prompt_blocks
            if blocks is None or req.prompt_token_ids is not None or self.tree.capacity <= 0:
                p = False
            else:
                n = req.prompt_len
                m = min(len(blocks), n // PROMPT_BLOCK_TOKENS)
                start = m * PROMPT_BLOCK_TOKENS
                node = self.tree.node(blocks[:m])
                if node is None:
                    p = False
                elif start >= n:
                    p = (node, start, [])
                elif m < len(blocks):   # the last block, cut short
                    p = (node, start, prompt_block_tokens(blocks[m])[:n - start])
                else:                   # more prompt than blocks: the request's own ids
                    p = (node, start, self._own(req, start, n))
            self.prefix = p
        return p or None

    def length(self, req) -> int:
        """len(token_ids(req)), without making them where it is known."""
        p = self._prefix(req)
        return req.prompt_len if p is not None else len(self.token_ids(req))

    def token_ids(self, req) -> list[int]:
        if req is not self.req:
            self.reset(req)
        if self.tokens is None:
            p = self._prefix(req)
            if p is None:
                self.tokens = req.prompt_tokens()
            else:
                out = []
                for n in p[0].path():
                    out += n.tokens()
                self.tokens = out + self.rest(req)
        return self.tokens

    def text(self, req) -> str:
        if req.prompt_text is not None:
            return req.prompt_text
        if req is not self.req:
            self.reset(req)
        if self.written is None:   # the ids written out, each id's text made once per run
            p = self._prefix(req)
            if p is None:
                self.written = _written(self.token_ids(req))
            else:
                parts = [n.text() for n in p[0].path()]
                if len(p[2]):
                    parts.append(self._own_text(req).decode())
                self.written = " ".join(parts)
        return self.written

    def chain(self, req, block_size: int) -> list[int]:
        if req is not self.req:
            self.reset(req)
        h = self.hashes.get(block_size)
        if h is None:
            p = self._prefix(req)
            if p is None:
                h = chain_hashes(self.token_ids(req), block_size)
            else:
                node = p[0]
                h = list(node.full_chain(block_size))
                _, last, carry = node.chain(block_size)
                rest = self.rest(req)
                h += chain_hashes(carry + rest if carry else rest, block_size, last)
            self.hashes[block_size] = h
        return h

    def own(self, req, block_size: int) -> _OwnChain:
        """The chain hashes of req's blocks past its whole prompt blocks (its prefix known), made
        as they are asked for (_OwnChain), once per decision."""
        got = self.owns.get(block_size)
        if got is None:
            h = self.hashes.get(block_size)
            node = self.prefix[0]
            if h is not None:
                got = _OwnChain(made=h[len(node.full_chain(block_size)):])
            else:
                _, last, carry = node.chain(block_size)
                rest = self.rest_list if self.rest_list is not None else self.prefix[2]
                got = _OwnChain(block_size, last, carry, rest)
            self.owns[block_size] = got
        return got

    def own_chain(self, req, block_size: int):
        """own(), as an iterator (a walk reads the first hash, and the rest only if it goes on)."""
        return iter(self.own(req, block_size))

    def segments(self, req, block_size: int) -> PromptSegments:
        """req's chain hashes for block_size in pieces (PromptSegments)."""
        p = self._prefix(req)
        if p is None:
            h = self.chain(req, block_size)
            return PromptSegments([], 0, None, 0, len(h), _OwnChain(made=h))
        node, start, rest = p
        pieces, shared = node.pieces(block_size)
        carry = node.chain(block_size)[2]
        k = (len(carry) + len(rest)) // block_size   # hashes past the whole blocks
        blocks = req.prompt_blocks
        if k and node.depth < len(blocks):   # the next block, cut short: a part of its piece
            child = node.children.get(blocks[node.depth])
            if child is None:
                child = self.tree.node(blocks[:node.depth + 1])
            if child is not None:
                return PromptSegments(pieces, shared, child.chain(block_size)[0], k, 0)
        return PromptSegments(pieces, shared, None, 0, k, self.own(req, block_size) if k else None)

    def parts(self, req):
        """(node of the request's whole prompt blocks, their ids as one array('I') (the node's:
        do not change it), the ids after them as an array('I')) for a request made of prompt
        blocks, else None: a token-keyed router may walk the shared part once per prefix."""
        p = self._prefix(req)
        if p is None:
            return None
        node, _, rest = p
        try:
            if isinstance(rest, list):
                own = array("I", rest)
            else:
                own = array("I")
                own.frombytes(rest.tobytes())   # uint32, native order: what array('I') holds
            return node, node.full_array(), own
        except (OverflowError, TypeError):
            return None

    def text_chain(self, req, block: int, max_blocks: int, seed: int) -> list[int]:
        """text_chain_hashes of the prompt's text, made from the prefix tree's pieces."""
        _, shared, own = self.text_split(req, block, max_blocks, seed)
        return shared + own

    def text_split(self, req, block: int, max_blocks: int, seed: int) -> tuple:
        """text_chain's hashes as (key, shared, own): `shared` the hashes up to the end of the
        request's whole prompt blocks (the same list, not to be changed, for every prompt with
        those blocks; `key` names it), `own` the rest; (None, [], all of them) for a prompt not
        made of blocks."""
        p = self._prefix(req) if req.prompt_text is None else None
        if p is None:
            return None, [], text_chain_hashes(self.text(req), block, max_blocks, seed)
        node = p[0]
        key = (block, max_blocks, seed)
        shared = node.text_full(key)
        own = []
        _, last, carry, count = node.text_chain(key)
        if len(p[2]) and count < max_blocks:
            data = self._own_text(req)
            if node.parent is not None:
                data = carry + b" " + data
            own = _chunk_hashes(data, block, max_blocks - count, last)
        if len(shared) + len(own) <= 1:   # not one whole block of text: no hashes at all
            return None, [], []
        return (node, key), shared, own

    def text_split_named(self, req, block: int, max_blocks: int, seed: int) -> tuple:
        """text_split, most of the request's own text blocks named rather than hashed, where the
        rest of the prompt is the request's own ids (sim/workload.py own_prompt_tokens: a pure
        function of own_prompt_seed and their places). A block is hashed while the own text it
        ends in is shorter than OWN_TEXT_ALIKE bytes (so far, other requests' own texts may be
        the same by chance: a first id of the same digits); every block after is named
        hash((hash so far, the text after the shared blocks' last hash, the seed, j)). Two
        requests agreeing over that much own text have the same seed, so the same ids at the same
        places: two blocks get one name exactly when their texts and every text before them are
        the same, as with the chain of hashes, and there are as many as text_split gives. The
        text is written only for the hashed blocks; its length is counted from the ids' digits.
        A router that only compares hashes (weighted's approximate prefix index) decides the same
        with either (tests/fleet/test_prompt_memo.py)."""
        p = self._prefix(req) if req.prompt_text is None else None
        if p is None or (self.own_at is None and self._own_span(req) is None):   # no own ids (or a cut block)
            return self.text_split(req, block, max_blocks, seed)
        node = p[0]
        key = (block, max_blocks, seed)
        shared, last, carry, before, count, lead, alike = self._named_rule(node, key)
        own = []
        if count < max_blocks:
            k = min((lead + self._own_text_len(req)) // block, max_blocks - count)
            if k > 0:
                hashed = min(k, alike)
                h = last
                if hashed:
                    own = _chunk_hashes(before + self._own_text_head(req, hashed * block - lead), block, hashed, last)
                    h = own[-1]
                name = hash((h, carry, own_prompt_seed(req.id)))
                own += [hash((name, j)) for j in range(hashed, k)]
        if len(shared) + len(own) <= 1:
            return None, [], []
        return (node, key), shared, own

    @staticmethod
    def _named_rule(node, key: tuple) -> tuple:
        """text_split_named's numbers of the prefix for the rule `key`, kept on its node: (its text
        hashes, the last hash, the bytes after it, those and a space where own text follows
        them, blocks so far, how many bytes come before the own text, the blocks that end in
        the own text's first OWN_TEXT_ALIKE bytes)."""
        fulls = node.kept()
        rule = fulls.get(("named", key))
        if rule is None:
            _, last, carry, count = node.text_chain(key)
            lead = len(carry) + 1 if node.parent is not None else 0
            rule = fulls[("named", key)] = (node.text_full(key), last, carry, carry + b" " if lead else b"",
                                            count, lead, (OWN_TEXT_ALIKE + lead - 1) // key[0])
        return rule
