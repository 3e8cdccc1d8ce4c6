"""Read a real fleet: one vLLM recording per replica (recorder.py), all on one clock.

    fleet = read_fleet(["rec-8101.jsonl.gz", "rec-8102.jsonl.gz"])   # in the router's worker order
    fleet = read_fleet(paths, vocab=load_vocab("model/"))            # + each prompt's text
    fleet.replicas[0].trace, .workload, .decisions                   # a replica as `sim vllm` reads it
    fleet.requests                                                   # every request, by arrival
    fleet.workload()                                                 # all of them, as the router got them
    client = read_client("client-catok.jsonl.gz")                    # what the client saw, by its ids

A fleet replayed under a router policy needs three things a single recording does not give:
- **one clock**: each recording's times are ms since its own recorder started (the header's
  `started_unix`); every replica's Trace and workload are shifted onto the earliest start of
  the set (meta `time_origin_unix`; each replica's `offset_ms`). The replicas ran on one
  machine or on clocks kept in step, so wall-clock starts can be compared;
- **which request went where**: the recorded id (vLLM's `cmpl-<X-Request-Id>-0-<8 hex>`) stays
  the request's id; the client's own id (`catok-12`) is kept beside it, to match a client's
  file. A request in two recordings is an error: each request is served by one replica;
- **what the router saw**: the front end's `arrival` (the request reaching vLLM, a few ms after
  the router) and the scheduler's `added`, both on the fleet clock, so that `added - arrival`
  (the front end's latency) can be fitted; and, for a router that matches the prompt's text
  (sglang-router), the text: recordings hold token ids, and a word-level tokenizer's vocabulary
  (`load_vocab`, the tiny model's tokenizer.json) turns them back into the words the client sent.

Replicas may differ (each has its own config: a warning says they do), but not in vLLM's version:
one fleet, one scheduler. Every problem with the input is one ValueError sentence that names
the file; nothing read is dropped without a warning.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sim.trace import Trace
from sim.workload import Workload

from .compare import decisions as decide
from .recording import Recording, is_async, mode_config, read_recording, to_trace, to_workload

MAX_RECORDINGS = 1024
# vLLM 0.32's completion ids: "cmpl-" + the X-Request-Id (or a random id) + "-<prompt index>-<8 hex>"
VLLM_ID = re.compile(r"^cmpl-(.+)-\d+-[0-9a-f]{8}$")
# the Trace's columns that are times (ms on the recording's clock), per table
TIME_COLUMNS = {"requests": ("arrival_time", "first_scheduled_time", "first_token_time", "finish_time",
                             "received_time"),
                "steps": ("start", "end"), "events": ("time",)}
QUIET_GAP_MS = 3_600_000.0   # no replica served anything for this long between two replicas' requests
APART_S = 24 * 3600.0   # recordings whose starts are further apart than this are hardly one fleet's run
# A front-end arrival (vLLM's Request.arrival_time, the wall clock) is the request's time in the API
# server before the scheduler got it: tokenizing, a hop to the engine, a step's wait at most. One
# further from its add than this is on another clock (a harness that numbers arrivals 0, 1, 2...,
# an engine that stamps a monotonic time) and says nothing of when the router sent it.
FRONT_END_MAX_MS = 600_000.0
CLOCK_SLACK_MS = 1_000.0    # an arrival after its add: the wall clock and the recorder's drift apart a little


@dataclass
class FleetReplica:
    """One replica of the fleet: its recording as `sim vllm` reads it, moved onto the fleet clock."""
    index: int                 # in the router's worker order (the order the recordings were given)
    name: str                  # the file's stem ("rec-8101"), unique within the fleet
    path: str
    header: dict               # the recording's header line
    trace: Trace               # to_trace, times in ms on the fleet clock
    workload: Workload         # to_workload(timed=True) on the fleet clock, with prompt_text where known
    decisions: dict            # the simulator's verdict, as `sim vllm --json` gives it
    offset_ms: float           # this recording's clock + offset_ms = the fleet clock
    # the rules it ran under (recording.mode_config: vllm_version, async_scheduling), for simulating
    # it; a vLLM without rules here keeps its own version, which simulating refuses in one sentence
    mode: dict = field(default_factory=dict)
    own_trace: Trace | None = None   # to_trace on the recording's own clock (what a cost model is fitted on)
    ended: bool = False        # the recorder closed the file (Recording.ended)


@dataclass(frozen=True)
class FleetRequest:
    """One request as the fleet served it; times in ms on the fleet clock."""
    id: str                    # the recorded (vLLM) id
    client_id: str             # the client's id (its X-Request-Id), or the recorded id
    replica: int               # the index of the replica that served it
    arrival: float             # the front end got it (about when the router sent it)
    added: float               # the scheduler got it
    prompt_len: int
    max_tokens: int
    prompt_text: str | None = None
    arrival_recorded: bool = True   # False: the recording had no arrival on its clock; `arrival` is `added`


@dataclass
class RealFleet:
    replicas: list[FleetReplica]
    requests: list[FleetRequest]       # every request, by arrival (ties: replica, then add order)
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def by_client_id(self) -> dict[str, FleetRequest]:
        """The requests by the client's id (a client that reused an id: the first by arrival)."""
        out: dict[str, FleetRequest] = {}
        for r in self.requests:
            out.setdefault(r.client_id, r)
        return out

    def workload(self) -> Workload:
        """Every request of the fleet as one workload, as the router got them: arrival_time is
        the front end's arrival on the fleet clock (the nearest time known to the router's
        decision), sorted by it; prompts as recorded (ids, text where known). The config is
        replica 0's (each replica's own is in its workload)."""
        own = {r.id: r for rep in self.replicas for r in rep.workload.requests}
        reqs = [dataclasses.replace(own[q.id], arrival_time=q.arrival, arrival_step=0) for q in self.requests]
        cfg = dict(self.replicas[0].workload.config) if self.replicas else {}
        return Workload(requests=reqs, config=cfg, name="fleet (requests)")


def client_id(recorded_id: str) -> str:
    """The id the client gave (X-Request-Id) from vLLM's `cmpl-<id>-0-<8 hex>`, else the id as is."""
    m = VLLM_ID.match(recorded_id)
    return m.group(1) if m else recorded_id


MAX_TOKENIZER_BYTES = 256 << 20   # a tokenizer.json read at most (large vocabularies take tens of MB)


def load_vocab(path) -> dict[int, str]:
    """token id -> word, from a word-level tokenizer's tokenizer.json (a file, or the model's
    directory that holds it): the tokenizer under which a text prompt of words joined by single
    spaces is one token per word, so that the ids give the text back exactly (tiny_model.py's).
    Any other tokenizer: ValueError (its ids do not say what text the client sent)."""
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_TOKENIZER_BYTES + 1)   # /dev/zero, or a file of gigabytes, stops here
    except OSError as e:
        raise ValueError(f"{p}: cannot be read ({e.strerror or e})") from None
    if len(raw) > MAX_TOKENIZER_BYTES:
        raise ValueError(f"{p}: is over {MAX_TOKENIZER_BYTES >> 20} MB, far more than a tokenizer.json")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):   # UnicodeDecodeError too; RecursionError: "[" nested deep
        raise ValueError(f"{p}: is not a tokenizer.json (not JSON)") from None
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordLevel" or not isinstance(model.get("vocab"), dict):
        kind = model.get("type") if isinstance(model, dict) else None
        what = f"a {str(kind)[:40]} tokenizer" if kind else "not a tokenizer.json of a known kind"
        raise ValueError(f"{p}: {what}, not a word-level one: its token ids do not give back the text a client "
                         "sent (tiny_model.py makes a word-level one)")
    try:
        return {int(i): str(w) for w, i in model["vocab"].items()}
    except (TypeError, ValueError):
        raise ValueError(f"{p}: its vocabulary maps words to something other than token ids") from None


def read_client(path) -> list[dict]:
    """A fleet client's file (fleet_launch.drive's, or the measuring kit's fleet_drive.py's: JSON
    lines, gzipped or not), one dict per request with its id under "id" (the kit's says "rid")."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror or e})") from None
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        rows = [json.loads(line) for line in text.decode().splitlines() if line.strip()]
    except (OSError, EOFError, ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError(f"{path}: is not a client's file (JSON lines)") from None
    if not all(isinstance(r, dict) and isinstance(r.get("id", r.get("rid")), str) for r in rows):
        raise ValueError(f"{path}: a line has no request id")
    return [{**r, "id": r.get("id", r.get("rid"))} for r in rows]


def _stem(path: str) -> str:
    name = Path(path).name
    for ext in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(ext)
    return name or "replica"


def _read(path) -> Recording:
    try:
        return read_recording(path)
    except OSError as e:
        raise ValueError(f"{path}: cannot be read ({e.strerror or e})") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def _shift_trace(trace: Trace, offset_ms: float, origin_unix: float) -> Trace:
    tables = {}
    for name in ("requests", "steps", "events"):
        t = getattr(trace, name).copy()
        for c in TIME_COLUMNS[name]:
            if c in t:
                t[c] = t[c].to_numpy(dtype=float) + offset_ms
        tables[name] = t
    meta = {**trace.meta, "time_origin": "the fleet's earliest recorder start", "time_origin_unix": origin_unix,
            "offset_ms": offset_ms}
    return Trace(requests=tables["requests"], steps=tables["steps"], batch=trace.batch, events=tables["events"],
                 kv=trace.kv, counters=trace.counters, meta=meta)


def _text(ids, vocab: dict[int, str]) -> str | None:
    try:
        return " ".join(vocab[int(i)] for i in ids)
    except KeyError:
        return None


def _workload(rec: Recording, vocab, warn, mode: dict) -> tuple[Workload, dict | None]:
    """(to_workload(timed=True) on the recording's own clock, each prompt's text by request id
    where vocab is given, else None)."""
    wl = to_workload(rec, timed=True, mode=mode)
    if vocab is None:
        return wl, None
    ids = {a["id"]: a.get("prompt") for a in rec.adds}   # the recorded token ids (not ones made from hashes)
    texts = {r.id: _text(ids[r.id], vocab) if ids.get(r.id) is not None else None for r in wl.requests}
    unknown = sum(t is None for t in texts.values())
    if unknown:
        warn(f"{unknown} of {len(wl.requests)} prompts have no text: they were not recorded as token ids, or hold "
             "ids outside the tokenizer's vocabulary")
    return wl, texts


def _shift_workload(wl: Workload, offset_ms: float, texts: dict | None) -> Workload:
    """wl on the fleet clock, with each prompt's text."""
    reqs = [dataclasses.replace(r, arrival_time=None if r.arrival_time is None else r.arrival_time + offset_ms,
                                prompt_text=None if texts is None else texts[r.id]) for r in wl.requests]
    return Workload(requests=reqs, config=wl.config, name=wl.name)


@dataclass
class _Replica:
    """What read_fleet keeps of a recording once its Trace, workload and verdict are made: the
    step lines and the prompts' id lists are let go (a long recording's take hundreds of MB, and
    the workload holds the ids)."""
    header: dict
    config: dict
    ended: bool
    adds: list            # (id, added, arrival, prompt_len, max_tokens) a request, in the order the scheduler got them
    trace: Trace          # on the recording's own clock
    workload: Workload    # on the recording's own clock
    texts: dict | None    # request id -> prompt text (vocab given)
    decisions: dict
    mode: dict
    notes: list           # the replica's warnings, in the order they came


def _convert(rec: Recording, vocab) -> _Replica:
    """What the fleet keeps of a recording (_Replica)."""
    notes: list[str] = []
    if rec.continues_earlier:
        notes.append("the file continues an earlier one (rotated): requests added before it are not in the fleet")
    try:
        mode, unruled = mode_config(rec), None
    except ValueError as e:   # a vLLM without rules here: its routing can still be replayed
        unruled = str(e)
        notes.append(f"{unruled}; its routing can still be replayed with recorded timing (the recordings' own times)")
        mode = {"async_scheduling": True} if is_async(rec) else {}
    wl, texts = _workload(rec, vocab, notes.append, mode)
    verdict = decide(rec) if unruled is None else {"equal": None, "not_simulated": unruled}
    if unruled is not None:
        mode = {**mode, "vllm_version": str(rec.header.get("vllm"))}
    tr = to_trace(rec)
    notes += rec.warnings
    adds = [(a["id"], a.get("added"), a.get("arrival"), a["prompt_len"], a["max_tokens"]) for a in rec.adds]
    return _Replica(rec.header, rec.config, rec.ended, adds, tr, wl, texts, verdict, mode, notes)


def _warn_apart(replicas: list, requests: list, warnings: list) -> None:
    """A warning when the replicas' requests fall into spells that never overlap, an hour or more
    apart (recordings of two runs given as one fleet: its clock then spans the gap)."""
    spans: dict[int, list[float]] = {}
    for r in requests:
        if r.added is not None:
            lo_hi = spans.setdefault(r.replica, [r.added, r.added])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], r.added), max(lo_hi[1], r.added)
    if len(spans) < 2:
        return
    ordered = sorted(spans.items(), key=lambda kv: kv[1][0])
    end, last = ordered[0][1][1], ordered[0][0]
    for k, (lo, hi) in ordered[1:]:
        if lo - end >= QUIET_GAP_MS:
            warnings.append(f"{replicas[k].name}'s requests began {(lo - end) / 3_600_000:,.1f} hours after "
                            f"{replicas[last].name}'s ended, and no replica served one in between: are the "
                            "recordings one fleet's run? (the fleet's clock spans the gap)")
            return
        if hi > end:
            end, last = hi, k


def read_fleet(paths, *, vocab: dict[int, str] | None = None, names: list[str] | None = None) -> RealFleet:
    """The fleet of these recordings, one per replica in the router's worker order (see the
    module's docstring). vocab: token id -> word (load_vocab), for each prompt's text. names:
    one per recording (default: the files' stems, made unique)."""
    paths = [str(p) for p in paths]
    if not paths:
        raise ValueError("a fleet needs at least one recording; none was given")
    if len(paths) > MAX_RECORDINGS:
        raise ValueError(f"{len(paths):,} recordings were given; a fleet here has at most {MAX_RECORDINGS:,} replicas")
    if names is not None and len(names) != len(paths):
        raise ValueError(f"{len(names)} names were given for {len(paths)} recordings")
    # one recording at a time, each let go once its Trace, workload and verdict are made: a fleet
    # of long recordings does not hold every one's step lines at once
    recs, versions = [], {}
    for p in paths:
        rec = _read(p)
        versions.setdefault(str(rec.header.get("vllm")), p)
        if len(versions) > 1:   # said at once, before the files after it are read
            said = ", ".join(f"{Path(p).name}: {v}" for v, p in versions.items())
            raise ValueError(f"the recordings are of different vLLM versions ({said}); a fleet's replicas run one vLLM")
        recs.append(_convert(rec, vocab))
        del rec   # (before the next file is read)
    names = list(names) if names is not None else [_stem(p) for p in paths]
    seen: dict[str, int] = {}
    for k, n in enumerate(names):   # the same stem in two folders: number the later ones
        seen[n] = seen.get(n, 0) + 1
        if seen[n] > 1:
            names[k] = f"{n} ({seen[n]})"
    starts = []
    for p, rec in zip(paths, recs):
        s = rec.header.get("started_unix")
        if not isinstance(s, (int, float)) or isinstance(s, bool) or s != s or s in (float("inf"), float("-inf")):
            raise ValueError(f"{p}: its header has no start time (started_unix), so it cannot be set on the "
                             "fleet's clock")
        starts.append(float(s))
    owner: dict[str, int] = {}
    by_client: dict[str, int] = {}
    for k, rec in enumerate(recs):
        for rid, *_ in rec.adds:
            for key, table in ((rid, owner), (client_id(rid), by_client)):
                j = table.setdefault(key, k)
                if j != k:
                    raise ValueError(f"request {key} is in both {paths[j]} and {paths[k]}: each request is "
                                     "served by one replica (the same recording given twice?)")
    origin = min(starts)
    warnings: list[str] = []

    def warner(name):
        def warn(msg):
            if len(warnings) < 100:
                warnings.append(f"{name}: {msg}")
        return warn

    if max(starts) - origin > APART_S:
        warnings.append(f"the recordings started {(max(starts) - origin) / 3600:.0f} hours apart: are they one "
                        "fleet's run?")
    configs = [rec.config for rec in recs]
    if any(c != configs[0] for c in configs):
        keys = sorted({k for c in configs for k in c if any(c.get(k) != d.get(k) for d in configs)})
        warnings.append(f"the replicas' settings differ ({', '.join(keys)}): each is simulated with its own")
    replicas, requests = [], []
    for k, (p, rec, name) in enumerate(zip(paths, recs, names)):
        warn = warner(name)
        off = (starts[k] - origin) * 1000.0
        for w in rec.notes:
            warn(w)
        wl = _shift_workload(rec.workload, off, rec.texts)
        tr = _shift_trace(rec.trace, off, origin)
        replicas.append(FleetReplica(k, name, p, rec.header, tr, wl, rec.decisions, off, rec.mode,
                                     own_trace=rec.trace, ended=rec.ended))
        off_clock = 0
        for rid, added, arrival, prompt_len, asked in rec.adds:
            seen = arrival is not None and (added is None or
                                            added - FRONT_END_MAX_MS <= arrival <= added + CLOCK_SLACK_MS)
            off_clock += arrival is not None and not seen
            if not seen:
                arrival = added
            requests.append(FleetRequest(
                id=rid, client_id=client_id(rid), replica=k,
                arrival=None if arrival is None else arrival + off, added=None if added is None else added + off,
                prompt_len=prompt_len, max_tokens=asked, prompt_text=rec.texts[rid] if rec.texts else None,
                arrival_recorded=seen))
        if off_clock:
            warn(f"{off_clock:,} of {len(rec.adds):,} front-end arrival times are off the recorder's clock (over "
                 f"{FRONT_END_MAX_MS / 60_000:.0f} minutes before their add, or after it): their add times stand in")
    _warn_apart(replicas, requests, warnings)
    order = {r.id: i for i, r in enumerate(requests)}
    requests.sort(key=lambda r: (r.arrival if r.arrival is not None else float("inf"), r.replica, order[r.id]))
    meta = {"time_unit": "ms", "time_origin_unix": origin, "vllm": next(iter(versions)), "replicas": names,
            "paths": paths, "offsets_ms": [r.offset_ms for r in replicas], "requests": len(requests),
            "configs_differ": any(c != configs[0] for c in configs), "prompt_text": vocab is not None}
    return RealFleet(replicas, requests, meta, warnings)
