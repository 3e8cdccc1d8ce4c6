"""One recorder line checked: every field the reader uses of the type it uses, or TypeError /
ValueError (the line is damaged and skipped). The header's checks, and the sentence for a file
that is no recording.

The checks take a fast path for what a recorder writes (plain ints in range) and fall back on
the per-value conversion for anything else, so both give the same values (a "3" is 3 either way).
"""
from __future__ import annotations

from array import array
from itertools import chain

from sim import versions
from sim.inputs import check_config
from sim.limits import MAX_ARRIVAL_TIME, archive_kind, shown, unpack_it

from ..format import CHECKED_WITH, FORMAT, UNVERSIONED, VERSION

# the header's settings that are the simulator's (SchedulerConfig) knobs, by the same names
CONFIG_KEYS = ("num_gpu_blocks", "block_size", "max_num_batched_tokens", "max_num_seqs", "policy",
               "enable_prefix_caching", "long_prefill_token_threshold", "enable_chunked_prefill",
               "max_model_len", "scheduler_reserve_full_isl", "watermark", "cache_aware_admission_window",
               "cache_aware_admission_threshold")
LINE_KINDS = frozenset(("step", "add", "finish", "end", "header", "rotate"))   # what the recorder writes
INT_MAX = 2**53   # counts, ids, block numbers: past this the Trace's columns (float64 on the way) would round them
_INF = (float("inf"), float("-inf"))
# a time on the recorder's clock: ms since it began, held to the bound a workload's arrival times
# have (past it, a fleet's clock or a router's timers would step through aeons). A front end's
# `arrival` is its own wall clock's and may be anything finite (the fleet reader checks it)
MAX_TIME_MS = MAX_ARRIVAL_TIME


def as_int(v) -> int:
    """A whole number in range (3.0 is 3; 3.5 is damaged, not 3)."""
    x = int(v)
    if not -INT_MAX <= x <= INT_MAX:
        raise ValueError("a number out of range")
    if isinstance(v, float) and x != v:
        raise ValueError("not a whole number")
    return x


def as_count(v) -> int:
    """A count, an index or a block id: a whole number, 0 or more (a recorder writes no other)."""
    x = as_int(v)
    if x < 0:
        raise ValueError("a negative count")
    return x


def as_num(v):
    if v is None:
        return None
    x = float(v)
    if x != x or x in _INF:
        raise ValueError("not a finite number")
    return x


def as_time(v):
    """A time on the recorder's own clock (a step's, an add's, a finish's), or None."""
    if v is None:
        return None
    x = float(v)
    if not -MAX_TIME_MS <= x <= MAX_TIME_MS:   # NaN and the infinities too
        raise ValueError("not a time in range")
    return x


def as_ints(v):
    """A list of counts (indices, block ids: whole, 0 to 2**53), as an array('q') (the
    recorder's lists: converted in C, in one go)."""
    if not isinstance(v, list):
        raise TypeError("not a list")
    try:
        out = array("q", v)   # plain ints (and bools) only: anything else takes the slow path
    except (TypeError, OverflowError):
        out = None
    if out is not None and (not out or (0 <= min(out) and max(out) <= INT_MAX)):
        return out
    return array("q", [as_count(x) for x in v])


def sched_entries(v) -> tuple[list, array]:
    """A step's `sched` ([[i, tokens, computed_before], ...]): the entries as tuples, and flat."""
    v = v or ()
    try:
        flat = array("q", chain.from_iterable(v))
    except (TypeError, OverflowError):
        flat = None
    if flat is not None and len(flat) == 3 * len(v) and all(len(e) == 3 for e in v) and \
            (not flat or (0 <= min(flat) and max(flat) <= INT_MAX)):
        return list(zip(flat[0::3], flat[1::3], flat[2::3])), flat
    out = [(as_count(i), as_count(n), as_count(cb)) for i, n, cb in v]
    return out, array("q", chain.from_iterable(out))


def clean_step(obj: dict) -> dict:
    """A step line with every field the reader uses of the type it uses. Left out: running /
    waiting when the line leaves them out (the step before's: the caller fills them). The int
    lists as array('q'); sched also flat as `sched_flat` (3 ints an entry), and, from lines a
    recorder wrote, only flat (steps.py makes the tuples when a step dict is asked for)."""
    k = obj["step"]
    obj["step"] = k if type(k) is int and -INT_MAX <= k <= INT_MAX else as_int(k)
    try:
        if _fast(obj):
            return obj
    except (TypeError, OverflowError):
        pass
    obj["sched"], obj["sched_flat"] = sched_entries(obj.get("sched"))
    for k in ("sampled", "pre"):
        obj[k] = as_ints(obj.get(k) or [])
    for k in ("running", "waiting"):
        if k in obj:
            obj[k] = as_ints(obj[k] or [])
    obj["fin"] = [(as_count(i), str(why)) for i, why in obj.get("fin") or ()]
    obj["blocks"] = [(as_count(i), as_ints(ids)) for i, ids in obj.get("blocks") or ()]
    t = list(obj.get("t") or [])[:4]
    obj["t"] = [as_time(x) for x in t + [None] * (4 - len(t))]
    for k in ("free", "free_sched", "cached_free", "waiting_n"):
        if obj.get(k) is not None:
            obj[k] = as_count(obj[k])
        else:
            obj.pop(k, None)   # null is "not recorded", as a missing key
    return obj


_ABSENT = object()


def _fast(obj: dict) -> bool:
    """The step's fields when they are as a recorder writes them (plain ints, four finite float
    times), put in obj; False, obj's fields untouched, for anything else (the per-value checks
    then decide, as they always did). TypeError / OverflowError: not plain 64-bit ints. The
    numbers that become the Trace's columns (tokens, computed_before, the counts) are held to
    +-2**53 here as there; request indices and block ids, only looked up or stored as int64,
    to 64 bits. Written out field by field, no loops over the keys, the usual case first: it
    runs once a step line. (The one thing done before a False: a count that is null is deleted,
    as the per-value checks delete it too.)"""
    g = obj.get
    sched = g("sched")
    if sched:
        flat = list(chain.from_iterable(sched))
        n = len(sched)
        # 3 ints an entry (the total says it for one entry, the lengths' set for more), in range
        # (min / max of the list: of an array they make an int of each value)
        if len(flat) != 3 * n or (n > 1 and len(set(map(len, sched))) != 1) or \
                min(flat) < 0 or max(flat) > INT_MAX:
            return False
        flat = array("q", flat)
    else:
        flat = array("q")
    sampled = g("sampled")
    if type(sampled) is list:
        sampled = array("q", sampled)
        if sampled and min(sampled) < 0:
            return False
    elif sampled is None:
        sampled = array("q")
    else:
        return False
    pre = g("pre")
    if type(pre) is list:
        pre = array("q", pre) if pre else array("q")
        if pre and min(pre) < 0:
            return False
    elif pre is None:
        pre = array("q")
    else:
        return False
    running = g("running", _ABSENT)   # mostly left out (written when it changes)
    if running is not _ABSENT:
        if type(running) is list:
            running = array("q", running)
            if running and min(running) < 0:
                return False
        elif running is None:
            running = array("q")
        else:
            return False
    waiting = g("waiting", _ABSENT)
    if waiting is not _ABSENT:
        if type(waiting) is list:
            waiting = array("q", waiting)
            if waiting and min(waiting) < 0:
                return False
        elif waiting is None:
            waiting = array("q")
        else:
            return False
    fin = g("fin")
    if fin:
        fin = [(i, str(why)) for i, why in fin]
        if min(array("q", [i for i, _ in fin])) < 0:   # plain ints, none negative
            return False
    else:
        fin = []
    blocks = g("blocks")
    if blocks:
        bl = [(i, array("q", ids)) for i, ids in blocks if type(ids) is list]
        if len(bl) != len(blocks) or min(array("q", [i for i, _ in bl])) < 0 or \
                any(ids and min(ids) < 0 for _, ids in bl):
            return False
    else:
        bl = []
    t = g("t")
    if type(t) is not list or len(t) != 4:
        return False
    t0, t1, t2, t3 = t
    if not (type(t0) is float and type(t1) is float and type(t2) is float and type(t3) is float) or \
            t0 - t0 + t1 - t1 + t2 - t2 + t3 - t3 != 0 or max(abs(t0), abs(t1), abs(t2), abs(t3)) > MAX_TIME_MS:
        return False
    v = g("free")
    if v is None:
        if "free" in obj:
            del obj["free"]   # null is "not recorded", as a missing key
    elif type(v) is not int or not 0 <= v <= INT_MAX:
        return False
    v = g("free_sched")
    if v is None:
        if "free_sched" in obj:
            del obj["free_sched"]
    elif type(v) is not int or not 0 <= v <= INT_MAX:
        return False
    v = g("cached_free")
    if v is None:
        if "cached_free" in obj:
            del obj["cached_free"]
    elif type(v) is not int or not 0 <= v <= INT_MAX:
        return False
    v = g("waiting_n")
    if v is None:
        if "waiting_n" in obj:
            del obj["waiting_n"]
    elif type(v) is not int or not 0 <= v <= INT_MAX:
        return False
    obj["sched"] = obj["sched_flat"] = flat   # tuples only when asked for (steps.py)
    obj["sampled"] = sampled
    obj["pre"] = pre
    if running is not _ABSENT:
        obj["running"] = running
    if waiting is not _ABSENT:
        obj["waiting"] = waiting
    obj["fin"] = fin
    obj["blocks"] = bl
    return True


def clean_add(obj: dict) -> dict:
    """An add line checked; its prompt ids held as an array('q') (8 bytes a token, not a list's 36)."""
    obj.update(i=as_count(obj["i"]), id=str(obj["id"]), prompt_len=as_count(obj["prompt_len"]),
               max_tokens=as_count(obj["max_tokens"]), priority=as_int(obj.get("priority") or 0),
               before_step=as_int(obj.get("before_step") or 1), added=as_time(obj.get("added")),
               arrival=as_num(obj.get("arrival")))
    if obj.get("prompt") is not None:   # token ids: plain 64-bit ints (they are never a float column)
        try:
            obj["prompt"] = array("q", obj["prompt"]) if type(obj["prompt"]) is list else as_ints(obj["prompt"])
        except (TypeError, OverflowError):
            obj["prompt"] = as_ints(obj["prompt"])
        if len(obj["prompt"]) != obj["prompt_len"]:
            raise ValueError("prompt length")
    if obj.get("hashes") is not None:
        obj["hashes"] = [str(h) for h in obj["hashes"]]
        for h in obj["hashes"]:
            int(h, 16)
    return obj


def clean_finish(obj: dict) -> dict:
    obj.update(i=as_count(obj["i"]), reason=str(obj.get("reason")), t=as_time(obj.get("t")),
               after_step=as_int(obj.get("after_step") or 0))
    return obj


def not_text(raw: bytes) -> str | None:
    """The sentence for first bytes (the first line, up to 512) that are an archive or binary, not
    text; None for text."""
    kind = archive_kind(raw[:512])
    if kind is not None:
        return f"this is not a vLLM step recording: {unpack_it(kind)}"
    head = raw[:256]
    try:
        head.decode("utf-8")
        text = b"\x00" not in head
    except UnicodeDecodeError as e:
        text = e.start >= len(head) - 3   # only a character cut at the end of the window
    return None if text else "this is a binary file, not a vLLM step recording (JSON lines)"


def not_a_recording(raw: bytes) -> str:
    """Why these first bytes (the first line) are no recording, in one sentence."""
    return not_text(raw) or ("this is not a vLLM step recording: its first line should be the recorder's "
                             f"JSON header (\"format\": \"{FORMAT}\")")


def check_header(obj, raw: bytes, warn) -> dict:
    """The header line, checked (ValueError: no recording, or a damaged one); what is odd about
    it goes to warn(sentence)."""
    if not isinstance(obj, dict) or obj.get("kind") != "header" or obj.get("format") != FORMAT:
        if isinstance(obj, dict) and "requests" in obj:
            raise ValueError("this is a workload file, not a vLLM step recording: open it on Playback")
        if isinstance(obj, dict) and "step" in obj and "scheduled" in obj:
            raise ValueError("this is an oracle trace (sim trace's JSON lines), not a vLLM step recording")
        raise ValueError(not_a_recording(raw))
    v = obj.get("version")
    if not isinstance(v, int) or v > VERSION:
        warn(f"recorded by a newer recorder (format version {v}; this reader knows {VERSION}): "
             "fields it does not know are ignored")
    named = obj.get("vllm")
    if named in UNVERSIONED:   # a recorder that could not read the version (mode_config keeps the newest rules)
        warn(f"the header does not say which vLLM ran: what the recorder read is unchecked, and it is "
             f"re-simulated with vLLM {versions.NEWEST}'s rules")
    elif str(named).split("+")[0] not in CHECKED_WITH:   # a local build's tag (+cu130, +cpu) aside
        try:   # the simulator's rules follow the header's version (mode_config); the recorder's reads do not
            near = versions.normalize(str(named))
            # (only a version after the checked ones borrows rules: the newest's)
            borrowed = versions.unchecked(str(named)) is not None
            ruled = (f"re-simulated with vLLM {near}'s rules"
                     + (", the nearest version the simulator was checked against" if borrowed else ""))
        except ValueError:
            ruled = "the simulator has no rules for that version"
        warn(f"recorded with vLLM {named if isinstance(named, str) and len(named) <= 40 else shown(named)}; "
             f"the recorder was checked inside vLLM "
             f"{CHECKED_WITH[0]} to {CHECKED_WITH[-1]}, so what it read of this version's scheduler is unchecked "
             f"({ruled})")
    if not isinstance(obj.get("config"), dict):
        obj["config"] = {}   # (mode_config says it cannot be re-simulated)
    try:   # the settings the simulator takes from it: of the types and ranges an upload must have
        check_config({k: obj["config"][k] for k in CONFIG_KEYS if k in obj["config"]})
    except ValueError as e:
        raise ValueError(f"the recording's header is damaged: {e}") from None
    return obj
