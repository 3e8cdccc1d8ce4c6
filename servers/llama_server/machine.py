"""The reader's state machine: tasks, slots and model calls, rebuilt record by record.

A scheduling iteration of the server is: `posting NEXT_RESPONSE` (a batch is being built), the
slots' lines adding decode tokens and prompt chunks to it, then the model call (OLD builds:
`decoding batch`; NEW builds: the first `decode: n_batch (effective)` attempt), which makes the
batch a step. Tasks arrive (queued), are launched on a slot, process their prompt in chunks,
sample tokens and are released. The frequent records are handled inline in _apply, the reader's
hot loop; the rare ones by the handlers (handlers.py), through the reader's `handlers` table.
"""
from __future__ import annotations

from .lines import K_MATCH, record
from .native import K_DBATCH, K_DEC, K_EFF, K_IGN_SLOT, K_IGN_SRV, K_POST, K_RUNS, K_SLOW_SLOT, K_TOK, K_YDONE
from .prefixes import clock_from_prefix
from .scan import MAX_EXAMPLES


class Task:
    """One task the log names, as its lines have told of it so far: its slot, arrival, launch,
    first chunk and token, end (step and time each), prompt and token counts, the server's own
    timings, and the pending prompt chunk whose size the next line will state."""

    __slots__ = ("key", "task", "run", "slot", "arr_t", "arr_step", "adm_t", "adm_step", "fs_step", "fs_t",
                 "ft_step", "ft_t", "fin_step", "fin_t", "prompt_len", "prompt_sent", "n_keep", "cached",
                 "max_tokens", "n_gen", "n_dec", "stop", "error", "cancelled", "launched", "finished",
                 "waiting", "pend_idx", "pend_x", "t_pn", "t_pms", "t_en", "t_ems", "fin_ev", "deferred",
                 "truncated", "seen_order", "pdone", "rel_n", "shifted", "midrun", "began")

    def __init__(self, key: str, task: int, run: int):
        self.key, self.task, self.run = key, task, run
        self.slot = None
        self.arr_t = self.arr_step = self.adm_t = self.adm_step = None
        self.fs_step = self.fs_t = self.ft_step = self.ft_t = self.fin_step = self.fin_t = None
        self.prompt_len = self.prompt_sent = self.n_keep = self.cached = self.max_tokens = None
        self.n_gen = 0
        self.n_dec = 0
        self.stop = self.error = None
        self.cancelled = self.launched = self.finished = self.waiting = False
        self.pend_idx = -1
        self.pend_x = 0
        self.t_pn = self.t_pms = self.t_en = self.t_ems = None
        self.fin_ev = -1
        self.deferred = 0
        self.truncated = False
        self.seen_order = 0
        self.pdone = False   # its prompt_done event was made
        self.rel_n = None    # the slot's tokens at release (`stop processing`)
        self.shifted = 0     # tokens dropped by context shifts; None when the prompt was cut
        self.midrun = False  # a slot line named it before any launch line: it began before the log
        self.began = False   # the log holds its arrival, launch or `new prompt` line


class StateMachine:
    """LlamaLogReader's state machine (a mixin: the state lives in the reader's slots)."""

    __slots__ = ()

    # ------------------------------------------------------------------ the hot loop
    def _apply(self, data: bytes, end: int, records, ends: list) -> int:
        """Run the state machine over records (kind, start, a, b, c, e, ts); returns how
        many were records. A SLOW candidate is a record when its family's regex matches there, and
        then the span it matched hides that family's candidates inside it, as re.finditer would.
        The frequent kinds are handled inline: this loop is the reader's hot path."""
        fams, handlers = self.families, self.handlers
        cur = self.cur_tasks
        b_step, b_req, b_slot, b_kind = self.b_step, self.b_req, self.b_slot, self.b_kind
        b_tok, b_cb, b_samp, st_end = self.b_tok, self.b_cb, self.b_samp, self.st_end
        slot_end, srv_end, que_end = ends
        n = 0
        for k, s, a, b, c, e, w in records:
            if k == K_TOK:   # a sampled token of task b: c generated so far, e remaining (-1: no limit)
                if s < slot_end:
                    continue
                t = cur.get(b) or self._task(b)
                if t.slot is None:
                    self._slot_seen(t, a)
                self.saw_tok = True
                if c > t.n_gen:
                    t.n_gen = c
                if t.ft_step is None:
                    t.ft_step = self.n_steps
                    t.ft_t = self._when(w, data, s)
                    if e >= 0 and t.max_tokens is None:
                        t.max_tokens = c + e
                if self.phase == 2 and self.saw_ts and st_end[-1] is None:
                    st_end[-1] = self._when(w, data, s)
            elif k == K_DEC:   # slot a's decode token for task b joins the batch; c: n_tokens/n_past
                if s < slot_end:
                    continue
                if self.phase != 1:
                    self._implicit_open()
                t = cur.get(b) or self._task(b)
                t.n_dec += 1
                if t.slot is None:
                    self._slot_seen(t, a)
                b_step.append(self.n_steps + 1)
                b_req.append(t.key)
                b_slot.append(a)
                b_kind.append("decode")
                b_tok.append(1)
                # OLD's n_past counts the token just added (e & 1); so does n_tokens in builds without
                # `id=` (2025-10 to 2026-04, by their source), while with `id=` (e & 2) it is the count
                # before it. A task's first decode token, right after its prompt, shows which way a
                # log without `id=` counts.
                if e & 1:
                    after = True
                elif e & 2:
                    after = False
                else:
                    if self.dec_after is None and t.n_dec == 1 and t.prompt_len is not None \
                            and 0 <= c - t.prompt_len <= 1:
                        self.dec_after = c > t.prompt_len
                    after = self.dec_after is not False
                b_cb.append(c - 1 if after else c)
                b_samp.append(True)
                self.it_dec += 1
            elif k == K_POST:   # the scheduler starts building a batch
                if s < srv_end:
                    continue
                if self.phase == 1:
                    self._abandon()
                self._open()
            elif k == K_EFF:   # a model call attempt (NEW builds); c: its offset in the batch
                if s < srv_end:
                    continue
                if self.phase == 2 and (self.fail_pending or c > 0):
                    self.st_attempts[-1] += 1
                    self.fail_pending = False
                else:
                    if self.phase == 2:   # off = 0 again without a failure: the opening line was lost
                        self._open()
                        self.headless_calls += 1
                    self._model_call(self._when(w, data, s), None)
            elif k == K_YDONE:   # the model call returned
                if s < que_end:
                    continue
                if self.phase == 2 and self.saw_ts:
                    st_end[-1] = self._when(w, data, s)
            elif k == K_DBATCH:   # a model call (OLD builds) of c tokens
                if s < srv_end:
                    continue
                self._model_call(self._when(w, data, s), c)
            elif k == K_RUNS:   # the iteration ends (OLD builds)
                if s < srv_end:
                    continue
                if self.phase == 2 and st_end[-1] is None and self.saw_ts:
                    st_end[-1] = self._when(w, data, s)
                self.phase = 0
            elif k == K_IGN_SLOT:
                if s < slot_end:
                    continue
                if b >= 0:   # a line the reader ignores still names its task and slot
                    t = cur.get(b)
                    if t is None or t.slot is None:
                        self._named(b, a)
            elif k == K_IGN_SRV:
                if s < srv_end:
                    continue
            elif k == K_MATCH:   # the regex tokenizer's rare records
                handlers[a.lastgroup](a, data, s)
                cur = self.cur_tasks   # a new server run replaces it
            else:   # SLOW: the family's regex decides
                f = k - K_SLOW_SLOT
                if s < (slot_end, srv_end, que_end)[f]:
                    continue
                m = fams[f].match(data, s, end)
                if m is None:
                    continue
                if f == 0:
                    slot_end = m.end()
                elif f == 1:
                    srv_end = m.end()
                else:
                    que_end = m.end()
                rec = record(m)
                if rec[0] == K_MATCH:
                    handlers[m.lastgroup](m, data, s)
                    cur = self.cur_tasks
                else:   # a frequent kind the C tokenizer left to the regex: the same path
                    self._apply(data, end, (rec,), [0, 0, 0])
            n += 1
        ends[:] = slot_end, srv_end, que_end
        return n

    # ------------------------------------------------------------------ server runs
    def _run_busy(self) -> bool:
        return self.n_steps >= self.run_first_step or bool(self.cur_tasks)

    def _run_record(self) -> dict:
        return {"run": self.run, "first_step": self.run_first_step, "last_step": self.n_steps,
                "build": self.build, "build_number": self.build_number, "build_commit": self.build_commit,
                "config": dict(self.cfg)}

    def _new_run(self) -> None:
        """The server started again in the same file (logs concatenated or a restart)."""
        self._close_iteration()
        for t in self.cur_tasks.values():
            if not t.finished:
                self._finish(t, None, None)
        self.cur_tasks = {}
        self.running = self.waiting = self.wait_prompt = 0
        self.arr_prev, self.arr_cur = [], []
        self.runs.append(self._run_record())
        self.cfg = {}
        self.build = self.build_number = self.build_commit = None
        self.dec_after = None   # the next run may be another build
        self.run += 1
        self.run_first_step = self.n_steps + 1
        if clock_from_prefix(self.prefixes):   # a collector's clock runs on over restarts
            self._warn("the log holds more than one server run (restart or concatenated logs): task ids of "
                       "later runs are prefixed with the run number")
            return
        if self.last_t is not None:
            self.t_offset = self.last_t
        self._warn("the log holds more than one server run (restart or concatenated logs): task ids of "
                   "later runs are prefixed with the run number and their times continue after the previous "
                   "run's last line (the real gap is unknown)")

    # ------------------------------------------------------------------ tasks and events
    def _task(self, tid: int, create: bool = True):
        t = self.cur_tasks.get(tid)
        if t is None and create:
            key = str(tid) if self.run == 1 else f"{self.run}.{tid}"
            if key in self.tasks:
                k = 2
                while f"{key}#{k}" in self.tasks:
                    k += 1
                key = f"{key}#{k}"
            t = Task(key, tid, self.run)
            t.seen_order = len(self.tasks)
            self.tasks[key] = t
            self.cur_tasks[tid] = t
        return t

    def _slot_seen(self, t: Task, slot: int) -> None:
        """A slot line names task t and it has no slot yet: the slot is the line's. Without a launch
        line before it, the task began before the log did (a rotated log, `tail`, a paste)."""
        t.slot = slot
        if not t.launched:
            t.midrun = True

    def _named(self, tid: int, slot: int) -> None:
        """A slot line the reader otherwise ignores names task tid on a slot."""
        t = self.cur_tasks.get(tid) or self._task(tid)
        if t.slot is None:
            self._slot_seen(t, slot)

    def _event(self, step, t, req: str, kind: str, detail: str = "") -> int:
        self.e_step.append(step)
        self.e_time.append(t)
        self.e_req.append(req)
        self.e_kind.append(kind)
        self.e_detail.append(detail)
        return len(self.e_step) - 1

    def _finish(self, t: Task, time, step) -> None:
        if t.finished:
            return
        t.finished = True
        if t.waiting:
            t.waiting = False
            self.waiting -= 1
        if t.launched:
            self.running -= 1
            if t.fs_step is None:
                self.wait_prompt -= 1
        t.fin_t = time
        t.fin_step = step
        t.fin_ev = self._event(step if step is not None else max(self.n_steps, 1), time, t.key, "finish", "")
        if self.st_finished and step is not None and step == self.n_steps:
            self.st_finished[-1] += 1

    # ------------------------------------------------------------------ iterations
    def _open(self) -> None:
        self.phase = 1
        self.iter_pos = len(self.b_step)
        self.fail_pending = False
        self.it_dec = self.it_pre = 0

    def _implicit_open(self) -> None:
        if self.phase == 1:
            return
        if self.phase == 0 and self.n_steps == 0 and not self.b_step:
            self._open()   # the first batch of a log that starts mid-way
            return
        self.implicit_opens += 1
        self._open()

    def _abandon(self) -> None:
        """A batch was being built but no model call followed: drop its entries."""
        pos = self.iter_pos
        if len(self.b_step) > pos:
            self.abandoned += 1
            for t in self.cur_tasks.values():
                if t.pend_idx >= pos:
                    t.pend_idx = -1
            for lst in (self.b_step, self.b_req, self.b_slot, self.b_kind, self.b_tok, self.b_cb, self.b_samp):
                del lst[pos:]
        self.phase = 0

    def _close_iteration(self) -> None:
        if self.phase == 1:
            self._abandon()
        self.phase = 0

    def _model_call(self, t, logged) -> None:
        """The first decode line of an iteration: the batch becomes a step."""
        if self.phase != 1:
            # a model call without the batch-building lines (log cut, or lines lost)
            self._open()
            self.headless_calls += 1
        self.n_steps += 1
        if self.arr_prev:
            # queued before the previous model call, never deferred, still without a slot: the
            # queue handled it without a slot (not a completion task, or refused)
            for tk in self.arr_prev:
                if tk.waiting and not tk.deferred and not tk.launched:
                    tk.waiting = False
                    self.waiting -= 1
        self.arr_prev = self.arr_cur
        self.arr_cur = []
        self.st_start.append(t)
        self.st_end.append(None)
        self.st_logged.append(logged)
        self.st_running.append(self.running)
        self.st_waiting.append(self.waiting)
        self.st_arrived.append(self.arr_since)
        self.arr_since = 0
        self.st_finished.append(0)
        self.st_attempts.append(1)
        self.phase = 2
        if self.it_dec:
            if self.it_pre:
                self.mixed_batches += 1
            elif self.wait_prompt > 0 and self.it_dec < (self.cfg.get("n_batch") or 0):
                self.nocb_evidence += 1
        if logged is not None:
            toks = self.b_tok[self.iter_pos:]
            if None not in toks:
                self.batch_checked += 1
                tot = sum(toks)
                if tot != logged:
                    self.batch_mismatch.append(f"step {self.n_steps}: rebuilt {tot} tokens, the log says {logged}"
                                               if len(self.batch_mismatch) < MAX_EXAMPLES else "")

    def _entry(self, t: Task, slot: int, kind: str, tokens, cb: int, sampled: bool) -> int:
        self.b_step.append(self.n_steps + 1 if self.phase == 1 else self.n_steps)
        self.b_req.append(t.key)
        self.b_slot.append(slot)
        self.b_kind.append(kind)
        self.b_tok.append(tokens)
        self.b_cb.append(cb)
        self.b_samp.append(sampled)
        if kind == "decode":
            self.it_dec += tokens
        else:
            self.it_pre += 1
        return len(self.b_step) - 1

    def _resolve(self, t: Task, end: int) -> None:
        i = t.pend_idx
        if i < 0:
            return
        n = end - t.pend_x
        if n >= 0:
            self.b_tok[i] = n
        t.pend_idx = -1

    def _chunk_start(self, t: Task, slot: int, x: int, data: bytes, s: int) -> None:
        self._implicit_open()
        self.saw_chunks = True
        if t.slot is None:
            self._slot_seen(t, slot)
        if t.pend_idx >= 0:
            self._resolve(t, x)
        if t.fs_step is None:
            t.fs_step = self.n_steps + 1
            t.fs_t = self._ts(data, s)
            t.cached = x
            if t.launched and not t.finished:
                self.wait_prompt -= 1
        t.pend_idx = self._entry(t, slot, "prefill", None, x, False)
        t.pend_x = x
