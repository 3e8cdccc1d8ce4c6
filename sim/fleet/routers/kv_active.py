"""The active blocks of kv_cost (sim/fleet/routers/dynamo.py) kept in pieces: per replica, each
prompt-block piece counts its active users and the own hashes are grouped by their first hash,
so a dispatch or a release touches a few entries, not every hash of the prompt twice. The
plain per-hash dicts take over, for good, when a piece's hash and an own hash could be equal
(dynamo.py's docstring says when). A mixin: the state lives on the KvCost router.
"""
from __future__ import annotations

from itertools import compress


class ActivePieces:
    """kv_cost's piece bookkeeping (methods on the router's own state)."""

    def _pieces_ok(self, segs) -> bool:
        """Note segs' new pieces; False if a piece hash and an own hash could be the same."""
        piece_len, reg = self.piece_len, self.registry
        pieces = segs.pieces
        if segs.part is None and (not pieces or pieces[-1][-1] in piece_len):
            # every piece seen: a piece's key fixes the path to it, whose pieces came with it
            return not segs.ntail or segs.first_tail() not in reg
        for pc in segs.pieces if segs.part is None else segs.pieces + [segs.part]:
            k = pc[-1]
            if k not in piece_len:
                if not self.own_firsts.keys().isdisjoint(pc) or len(reg) + len(pc) > self.REGISTRY:
                    return False
                piece_len[k] = len(pc)
                reg.update(pc)
        return not segs.ntail or segs.first_tail() not in reg

    def _to_plain(self) -> None:
        """Go back to the plain per-hash dicts (the same counts), for good."""
        self.in_pieces = False
        rcs, holders = self.rcs, self.holders
        for rid, (r, segs, tokens) in list(self.active.items()):
            hashes = segs.hashes()
            rc, bit = rcs[r], 1 << r
            for h in hashes:
                c = rc.get(h, 0)
                rc[h] = c + 1
                if not c:
                    holders[h] = holders.get(h, 0) | bit
            self.active[rid] = [r, hashes, tokens]
        for r in range(self.n):
            self.nblocks[r] = len(rcs[r])
        self.bs = None   # keys are for the fast path in pieces only
        self.full = self.part = self.tails = self.tail_counts = None
        self.held, self.piece_len, self.registry, self.own_firsts = {}, {}, set(), {}

    def _counts(self, r: int, t1, group) -> dict:
        """Hash -> how many of `group`'s own chains (two or more, first hash t1, on replica r)
        hold it: kept as chains come and go, so that a group of thousands (a backlog of requests
        with one seeded prompt) is not unioned again at every dispatch and release."""
        counts = self.tail_counts[r].get(t1)
        if counts is None:
            counts = self.tail_counts[r][t1] = {}
            for g in group:
                for h in g.tail():
                    counts[h] = counts.get(h, 0) + 1
        return counts

    def _cover(self, r: int, k, length: int) -> int:
        """How many of piece k's hashes are active on replica r (its first ones)."""
        if self.full[r].get(k):
            return length
        pj = self.part[r].get(k)
        return max(pj) if pj else 0

    def _present_pieces(self, r: int, segs) -> int:
        """_present for segs on replica r."""
        full, part = self.full[r], self.part[r]
        acc = 0
        for pc in segs.pieces:
            k = pc[-1]
            if full.get(k):
                acc += len(pc)
                continue
            pj = part.get(k)
            return acc + max(pj) if pj else acc
        if segs.part is not None:
            return acc + min(self._cover(r, segs.part[-1], len(segs.part)), segs.j)
        if segs.ntail:
            t1 = segs.first_tail()
            group = self.tails[r].get(t1)
            if group:
                have = set(group[0].tail()) if len(group) == 1 else self._counts(r, t1, group)
                for h in segs.tail():
                    if h not in have:
                        break
                    acc += 1
        return acc

    def _mark(self, k, bit: int, on: bool) -> None:
        held = self.held
        if on:
            held[k] = held.get(k, 0) | bit
        else:
            m = held[k] & ~bit
            if m:
                held[k] = m
            else:
                del held[k]

    def _use_part(self, r: int, segs, step: int) -> int:
        """segs' part of a cut block now used (step 1) or no longer (-1) on replica r: how many
        more of the piece's hashes are active there."""
        part = self.part[r]
        k, j, length = segs.part[-1], segs.j, len(segs.part)
        before = self._cover(r, k, length)
        pj = part.get(k)
        if pj is None:
            pj = part[k] = {}
        c = pj.get(j, 0) + step
        if c:
            pj[j] = c
        else:
            del pj[j]
            if not pj:
                del part[k]
        after = self._cover(r, k, length)
        if (before == 0) != (after == 0):
            self._mark(k, 1 << r, bool(after))
        return after - before

    def _use(self, r: int, segs, step: int) -> None:
        """segs' hashes now active on replica r (step 1: dispatched) or no longer (-1: released);
        nblocks[r] and keys[r] (ptok[r] already changed) follow."""
        full, part, bit = self.full[r], self.part[r], 1 << r
        edge = 1 if step > 0 else 0   # a piece's count there: its first whole use came, or its last went
        nb = 0   # how many more of r's blocks are active
        for pc in segs.pieces:
            k = pc[-1]
            c = full.get(k, 0) + step
            if c:
                full[k] = c
            else:
                del full[k]
            if c == edge:
                pj = part.get(k) if part else None
                if pj:
                    nb += step * (len(pc) - max(pj))
                else:
                    nb += step * len(pc)
                    self._mark(k, bit, step > 0)
        if segs.part is not None:
            nb += self._use_part(r, segs, step)
        if segs.ntail:
            # most own chains are the only one with their first hash on the replica: its first
            # use or its last, done here; a group of two or more, in _use_tail
            t1 = segs.own.first()
            tails = self.tails[r]
            group = tails.get(t1)
            if group is None and step > 0:
                tails[t1] = [segs]
                nb += segs.ntail
                held, own = self.held, self.own_firsts
                held[t1] = held.get(t1, 0) | bit
                own[t1] = own.get(t1, 0) + 1
            elif step < 0 and len(group) == 1 and group[0] is segs:
                del tails[t1]
                nb -= segs.ntail
                self._mark(t1, bit, False)
                own = self.own_firsts
                c = own[t1] - 1
                if c:
                    own[t1] = c
                else:
                    del own[t1]
            else:
                nb += self._use_tail(r, segs, step)
        self.nblocks[r] += nb
        self._rekey(r)

    def _use_tail(self, r: int, segs, step: int) -> int:
        """_use for segs' own hashes when other own chains on replica r have the same first hash
        (a group of two or more before or after: its hashes counted, _counts): how many more of
        them are active there. The first hash stays active there either way."""
        t1 = segs.first_tail()
        group = self.tails[r][t1]
        counts = self._counts(r, t1, group) if len(group) > 1 else None
        before = len(counts) if counts is not None else group[0].ntail
        if step > 0:
            if counts is None:
                counts = self._counts(r, t1, group + [segs])
            else:
                for h in segs.tail():
                    counts[h] = counts.get(h, 0) + 1
            group.append(segs)
        else:   # one of two or more goes: counts are kept
            del group[next(i for i, g in enumerate(group) if g is segs)]
            for h in segs.tail():
                c = counts[h] - 1
                if c:
                    counts[h] = c
                else:
                    del counts[h]
        after = len(counts)
        if len(group) <= 1:   # one chain left: its own count serves (no counts kept)
            self.tail_counts[r].pop(t1, None)
        own = self.own_firsts
        own[t1] += step
        return after - before

    # -- keys: ptok + block size x nblocks per replica, the order of the costs of the replicas
    # that hold none of the prompt (KvCost._lowest); the lowest, how many have it and (lowi) one
    # replica at it are kept as they change, read again from every key only when the last
    # replica at it leaves it (lowi: None when not known, read when the lowest is one replica's)
    def _keys_init(self) -> None:
        bs = self.bs
        self.keys = [p + bs * b for p, b in zip(self.ptok, self.nblocks)]
        self.key_bound = max(self.key_bound, *self.keys)
        self.low = self.lowi = None

    def _rekey(self, r: int) -> None:
        """keys[r] after ptok[r] or nblocks[r] changed."""
        k = self.ptok[r] + self.bs * self.nblocks[r]
        old = self.keys[r]
        if k == old:
            return
        self.keys[r] = k
        low = self.low
        if low is not None:
            if k < low:
                self.low, self.nlow, self.lowi = k, 1, r
            elif k == low:
                self.nlow += 1
            elif old == low:
                self.nlow -= 1
                if not self.nlow:
                    self.low = None
                elif self.lowi == r:
                    self.lowi = None
        if k > self.key_bound:
            self.key_bound = k

    def _low_group(self, some: list) -> list:
        """The replicas not in `some` at the lowest key of every replica (see KvCost._lowest),
        in order."""
        keys, low = self.keys, self.low
        if low is None:
            low = self.low = min(keys)
            self.nlow = keys.count(low)
            self.lowi = None
        if self.nlow == 1:
            i = self.lowi   # the one at the lowest key, when known (_rekey keeps it)
            if i is None:
                i = self.lowi = keys.index(low)
            return () if i in some else self.alone[i]
        at = list(compress(range(self.n), map(low.__eq__, keys)))
        return at if set(some).isdisjoint(at) else [i for i in at if i not in some]

    def _segments(self, request, ctx, reps):
        """The prompt in pieces, or None (then the plain dicts, for good)."""
        if self.in_pieces is None:
            self.in_pieces = getattr(ctx, "prompt_segments", None) is not None and len(self._block_sizes(reps)) == 1
            if self.in_pieces:
                self.bs = reps[0].block_size
                self._keys_init()
        if not self.in_pieces:
            return None
        segs = ctx.prompt_segments(request, reps[0].block_size)
        if not self._pieces_ok(segs):
            self._to_plain()
            return None
        return segs
