"""One engine per process, stepping in a worker thread, for live pages.

Ownership is the whole safety argument: only the worker thread touches the engine. Everyone
else talks to it through an inbox (submit, trace) and reads what the worker publishes after
each step (snapshot), under a short lock, as copies. So a page's script thread never waits
for a forward pass, and no session can see or cause a half-done step.

Sessions: any number may watch (snapshot). One drives at a time: `claim(session)` takes the
wheel if it is free (or already yours), `release(session)` gives it back; start, stop and
submit are refused (PermissionError) for anyone else.

Arrivals over time: a submitted request whose `arrival_time` (ms since the run started; see
`now_ms`) is still ahead waits in the worker until then (status "scheduled"), and joins the
engine as a timed arrival, so the Trace records the intended arrival time.

    svc = get_service()                      # the process's service
    svc.claim("me")
    svc.start("me", EngineConfig(model="tiny"), {"num_gpu_blocks": 256, "max_num_batched_tokens": 128})
    svc.submit("me", [Request("r1", 40, 16)])
    snap = svc.snapshot(since_step=0)        # steps done so far, request states, queues
    trace = svc.trace()                      # the run so far as a Trace
    svc.stop("me")
"""
from __future__ import annotations

import copy
import heapq
import queue
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from sim.kvpool import OP_NAMES
from sim.workload import Request

from .config import EngineConfig

if TYPE_CHECKING:  # the engine (and torch) load at the first start(), not when a page imports this
    from .engine import LLMEngine, StepOutput
    from .sampling import SamplingParams

_IDLE_WAIT_S = 0.05


class EngineService:
    def __init__(self):
        self._pub = threading.Lock()  # guards the published state below
        self._control = threading.Lock()  # serialises start/stop
        self._inbox: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._driver: str | None = None
        self.engine: LLMEngine | None = None
        self._engine_config: EngineConfig | None = None
        self._run = 0  # counts starts, so a watcher can tell a new run from more of the old one
        self._pending: list = []  # (arrival ms, order, request, sampling): timed arrivals not yet due
        self._order = 0
        self._reset_published()

    def _reset_published(self, info: dict | None = None):
        with self._pub:
            self._steps: list[dict] = []
            self._requests: dict[str, dict] = {}
            self._info = dict(info or {})
            self._error: str | None = None
            self._kv_seen = 0

    # -- who drives ------------------------------------------------------------------------
    def claim(self, session: str) -> bool:
        with self._pub:
            if self._driver in (None, session):
                self._driver = session
                return True
            return False

    def release(self, session: str) -> None:
        with self._pub:
            if self._driver == session:
                self._driver = None

    @property
    def driver(self) -> str | None:
        return self._driver

    def _check_driver(self, session: str) -> None:
        if self._driver != session:
            raise PermissionError(f"session {session!r} does not drive the engine (driver: {self._driver!r})")

    # -- control (driver only) ----------------------------------------------------------------
    def start(self, session: str, engine_config: EngineConfig | dict | None = None, scheduler: dict | None = None,
              max_model_len: int | None = None) -> None:
        """Start a new run: build the engine (again only if its model/device/dtype changed),
        reset the scheduler with `scheduler` (a SchedulerConfig dict), start stepping."""
        self._check_driver(session)
        with self._control:
            self._halt()
            ec = engine_config if isinstance(engine_config, EngineConfig) else EngineConfig.from_dict(engine_config)
            if self.engine is None or ec != self._engine_config:
                from .engine import LLMEngine

                self.engine = None  # drop the old model and KV pool first
                self.engine = LLMEngine(ec, scheduler, max_model_len=max_model_len)
                self._engine_config = ec
            else:
                self.engine.reset(scheduler, max_model_len)
            e = self.engine
            self._run += 1
            self._pending = []
            self._reset_published({
                "run": self._run, "device": str(e.device), "dtype": str(e.dtype).replace("torch.", ""),
                "threads": e.threads,
                "model": e.model.config.to_dict(), "model_params": e.model.config.num_params,
                "scheduler": e.sched_cfg.to_dict(), "max_model_len": e.max_model_len,
                "num_blocks": e.sched_cfg.num_gpu_blocks, "block_size": e.sched_cfg.block_size,
                "kv_bytes": e.runner.cache.nbytes, "attention": e.runner.attention,
                "attention_check": e.runner.attention_check})
            self._inbox = queue.Queue()
            self._stop.clear()
            self._thread = threading.Thread(target=self._work, name="engine-worker", daemon=True)
            self._thread.start()

    def stop(self, session: str) -> None:
        """Stop stepping; the run's state stays readable (snapshot, trace)."""
        self._check_driver(session)
        with self._control:
            self._halt()

    def _halt(self) -> None:
        t = self._thread
        if t is not None:
            self._stop.set()
            self._inbox.put(("wake",))
            t.join()
            self._thread = None
        with self._pub:
            for _t, _n, r, _s in self._pending:  # never arrived: say so
                self._requests[r.id].update(status="cancelled", finish_reason="cancelled")
        self._pending = []

    def now_ms(self) -> float:
        """ms since the current run started (the clock of `arrival_time`); 0 when none runs."""
        e = self.engine
        return e.now() if e is not None and self.running else 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, session: str, requests: list[Request], sampling: SamplingParams | None = None) -> None:
        """Queue requests for the next step. Checked here against the run's limits (ValueError)."""
        self._check_driver(session)
        if not self.running:
            raise RuntimeError("the engine is not running; start it first")
        e = self.engine
        with self._pub:
            known = set(self._requests)
        for r in requests:
            if r.id in known:
                raise ValueError(f"duplicate request id {r.id!r}")
            known.add(r.id)
            e.check_request(r)
        with self._pub:
            for r in requests:
                self._requests[r.id] = {"status": "submitted", "prompt_len": r.prompt_len,
                                        "max_tokens": r.max_tokens, "tenant": r.tenant, "generated": [],
                                        "arrival_ms": None, "first_token_ms": None, "finish_ms": None,
                                        "preemptions": 0, "finish_reason": None}
        for r in requests:
            self._inbox.put(("add", r, sampling))

    # -- reading (anyone) ------------------------------------------------------------------------
    def snapshot(self, since_step: int = 0) -> dict:
        """Copies: run info, the steps after the first `since_step` (each with its batch, sampled
        tokens, phase times, queue lengths and KV block changes), every request's state."""
        with self._pub:  # published step records are never changed after publishing
            return {"run": self._run, "running": self.running, "driver": self._driver, "error": self._error,
                    "num_steps": len(self._steps), "info": copy.deepcopy(self._info),
                    "steps": [dict(s) for s in self._steps[max(0, since_step):]],
                    "requests": {rid: dict(r, generated=list(r["generated"])) for rid, r in self._requests.items()}}

    def trace(self, timeout: float | None = 30.0):
        """The run so far as a Trace (built by the worker between steps, or here when stopped)."""
        if self.engine is None:
            return None
        if not self.running:
            with self._control:
                return self.engine.trace()
        fut: Future = Future()
        self._inbox.put(("trace", fut))
        return fut.result(timeout)

    # -- the worker --------------------------------------------------------------------------------
    def _work(self) -> None:
        e = self.engine
        try:
            while not self._stop.is_set():
                busy = e.has_requests()
                wait = _IDLE_WAIT_S
                if self._pending:
                    wait = min(wait, max(0.0, (self._pending[0][0] - e.now()) / 1000.0))
                try:
                    item = self._inbox.get(timeout=wait) if not busy and wait > 0 else self._inbox.get_nowait()
                except queue.Empty:
                    item = None
                while item is not None:
                    self._handle(e, item)
                    try:
                        item = self._inbox.get_nowait()
                    except queue.Empty:
                        item = None
                if self._stop.is_set():
                    break
                while self._pending and self._pending[0][0] <= e.now():
                    _t, _n, req, sampling = heapq.heappop(self._pending)
                    self._arrive(e, req, sampling, timed=True)
                if e.has_requests():
                    self._publish(e, e.step())
        except Exception as exc:  # the run is over; say why
            with self._pub:
                self._error = f"{type(exc).__name__}: {exc}"
        finally:
            while True:  # nobody waits forever on a trace
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item[0] == "trace":
                    item[1].set_result(e.trace())

    def _handle(self, e: LLMEngine, item) -> None:
        kind = item[0]
        if kind == "add":
            _, req, sampling = item
            if req.arrival_time is not None and req.arrival_time > e.now():
                self._order += 1
                heapq.heappush(self._pending, (req.arrival_time, self._order, req, sampling))
                with self._pub:
                    self._requests[req.id]["status"] = "scheduled"
                return
            self._arrive(e, req, sampling, timed=req.arrival_time is not None)
        elif kind == "trace":
            item[1].set_result(e.trace())

    def _arrive(self, e: LLMEngine, req: Request, sampling: SamplingParams | None, timed: bool) -> None:
        seq = e.add_request(req, sampling, timed=timed)
        with self._pub:
            r = self._requests[req.id]
            r["arrival_ms"] = req.arrival_time if timed else e.now()
            r["status"] = seq.status
            if seq.status == "rejected":
                r["finish_reason"] = "rejected"

    def _publish(self, e: LLMEngine, out: StepOutput | None) -> None:
        if out is None:
            return
        pool = e.sched.pool
        i0, i1 = self._kv_seen, pool.log_len
        kv = [(b, r, OP_NAMES[op]) for _, b, r, op in pool.log_rows(i0, i1)]
        self._kv_seen = i1
        rec = {"step": out.step, "start": out.start, "end": out.end, "phases": out.phases,
               "entries": out.entries, "sampled": out.sampled, "finished": out.finished,
               "preempted": out.preempted, "admitted": out.admitted, "num_tokens": out.num_tokens,
               "slots": [e.seqs[rid].slot for rid, *_ in out.entries],  # each entry's lane
               "running": len(e.sched.running), "waiting": len(e.sched.waiting), "free_blocks": pool.num_free,
               "kv": kv}
        reasons = e.finish_reasons() if out.finished else {}
        with self._pub:
            self._steps.append(rec)
            for rid, _kind, _n, _before in out.entries:
                self._requests[rid]["status"] = "running"
            for rid, tok in out.sampled.items():
                r = self._requests[rid]
                r["generated"].append(tok)
                if r["first_token_ms"] is None:
                    r["first_token_ms"] = out.end
            for rid in out.preempted:
                self._requests[rid]["status"] = "preempted"
                self._requests[rid]["preemptions"] += 1
            for rid in out.finished:
                r = self._requests[rid]
                r["status"], r["finish_ms"], r["finish_reason"] = "finished", out.end, reasons.get(rid)


_service: EngineService | None = None
_service_lock = threading.Lock()


def get_service() -> EngineService:
    """The process's one engine service (a cached resource for every page and session)."""
    global _service
    with _service_lock:
        if _service is None:
            _service = EngineService()
        return _service
