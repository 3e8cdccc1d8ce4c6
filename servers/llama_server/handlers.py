"""What the rare records do: one handler per named group of the line families (lines.py).

The reader's `handlers` table maps a group name to its method; each gets the match, the block
and the record's start. Start-up lines name the build and the server's settings; slot lines
follow a task through its slot (prompt chunks, sampling, timings, stop and release); srv and que
lines tell of arrivals, deferrals, cancellations, KV-cache failures and decode errors.
"""
from __future__ import annotations

import re

from .lines import G_SID, G_TID, IGNORED_SLOT, IGNORED_SRV, STOP_MAP
from .machine import Task


class Handlers:
    """LlamaLogReader's handlers of the rare records (a mixin: the state lives in the reader's slots)."""

    __slots__ = ()

    # ------------------------------------------------------------------ start-up lines
    def _h_build(self, m, data, s):
        if self._run_busy():
            self._new_run()
        self.build_number = int(m.group("bn"))
        self.build_commit = m.group("bh").decode()
        self.build = f"{self.build_number} ({self.build_commit})"

    def _h_cfg(self, m, data, s):
        if self.n_steps >= self.run_first_step:
            return  # only the start-up block describes the server
        k = m.group("ck").decode()
        v = m.group("cv").decode("utf-8", "replace")
        key = {"n_ctx_seq": "n_ctx_slot", "n_ctx_per_seq": "n_ctx_slot"}.get(k, k)
        if v in ("true", "false"):
            val = v == "true"
        else:
            try:
                val = int(v)
            except ValueError:
                if k.startswith("n_"):   # a size that is no number (a damaged line): not a setting
                    self._warn(f"a start-up line gives {k} = {v[:20]!r}, not a number: ignored")
                    return
                val = v
        self.cfg[key] = val

    def _h_loadm(self, m, data, s):
        if self._run_busy():
            self._new_run()   # a restart whose build line was not seen

    def _h_nslots(self, m, data, s):
        self.cfg["n_slots"] = int(m.group("nsl"))

    # ------------------------------------------------------------------ slot handlers
    def _slot_task(self, m) -> Task:
        """The task a slot line names, given the line's slot when it has none yet."""
        t = self._task(int(m.group(G_TID)))
        if t.slot is None:
            self._slot_seen(t, int(m.group(G_SID)))
        return t

    def _h_draft(self, m, data, s):
        self._implicit_open()
        t = self._slot_task(m)
        t.n_dec += 1
        self._entry(t, int(m.group(G_SID)), "decode", 1 + int(m.group("draft_d")), int(m.group("draft_p")), True)

    def _h_chunk(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        self._chunk_start(self._task(tid), int(m.group(2)), int(m.group("chunk_x")), data, s)

    def _h_kvrm(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        self._chunk_start(self._task(tid), int(m.group(2)), int(m.group("kvrm_x")), data, s)

    def _h_prog(self, m, data, s):
        t = self._slot_task(m)
        self._resolve(t, int(m.group("prog_p")))

    def _h_pdone(self, m, data, s):
        t = self._slot_task(m)
        p = int(m.group("pdone_p"))
        i = t.pend_idx
        self._resolve(t, p)
        if i < 0 and self.b_req and self.phase == 1:
            # find this task's last chunk in the batch being built (resolved by the progress line)
            for j in range(len(self.b_req) - 1, self.iter_pos - 1, -1):
                if self.b_req[j] == t.key and self.b_kind[j] == "prefill":
                    i = j
                    break
        if i >= 0:
            self.b_samp[i] = True
        if t.prompt_len is None:
            t.prompt_len = p
        self._prompt_done(t, p, data, s)

    def _prompt_done(self, t: Task, p: int, data, s) -> None:
        # builds of 2025-12 to 2026-05 print both `prompt done` and `init sampler`: one event
        if not t.pdone:
            t.pdone = True
            self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "prompt_done",
                        f"{p} prompt tokens in the slot")

    def _h_isamp(self, m, data, s):
        t = self._slot_task(m)
        total = int(m.group("isamp_t"))
        i = t.pend_idx
        self._resolve(t, total)
        if i >= 0:
            self.b_samp[i] = True
        t.prompt_len = total
        self._prompt_done(t, total, data, s)

    def _h_newp(self, m, data, s):
        t = self._slot_task(m)
        t.began = True   # its prompt starts here: its first chunk and cached prefix are in the log
        n = int(m.group("newp_n"))
        t.prompt_len = n
        if t.prompt_sent is None:
            t.prompt_sent = n
        t.n_keep = int(m.group("newp_k"))
        if "n_ctx_slot" not in self.cfg:
            self.cfg["n_ctx_slot"] = int(m.group("newp_c"))

    def _h_stop(self, m, data, s):
        t = self._slot_task(m)
        t.stop = STOP_MAP.get(m.group("stop_k"), "stop")
        np_ = m.group("stop_np")
        if np_ is not None and t.max_tokens is None and int(np_) >= 0:
            t.max_tokens = int(np_)

    def _h_rel(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._slot_task(m)
        n = int(m.group("rel_n"))
        if t.pend_idx >= 0:
            self._resolve(t, n)
        if m.group("rel_t") != b"0":
            t.truncated = True
        t.rel_n = n
        self._finish(t, self._ts(data, s), self.n_steps or None)

    def _h_launch(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._task(tid)
        if (t.launched or t.midrun) and t.finished:   # the same id again: a new task
            del self.cur_tasks[tid]
            t = self._task(tid)
        if t.launched:
            return
        t.launched = t.began = True
        t.midrun = False
        t.slot = int(m.group(2))
        t.adm_step = self.n_steps + 1
        t.adm_t = self._ts(data, s)
        if t.waiting:
            t.waiting = False
            self.waiting -= 1
        self.running += 1
        if t.fs_step is None:
            self.wait_prompt += 1
        self._event(t.adm_step, t.adm_t, t.key, "admit", f"slot {t.slot}")

    def _h_lslot(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return  # NEW builds print the slot's previous task here
        e = m.end()
        le = data.find(b"\n", e)
        seg = data[e:le if le >= 0 else len(data)]
        mt = re.search(rb'"id_task":(-?\d{1,15})', seg)
        if mt is None or int(mt.group(1)) != tid:
            return
        mp = re.search(rb'"n_predict":(-?\d{1,15})', seg)
        if mp is not None and int(mp.group(1)) >= 0:
            t = self._task(tid)
            if t.max_tokens is None:
                t.max_tokens = int(mp.group(1))

    def _h_cshift(self, m, data, s):
        t = self._slot_task(m)
        if t.shifted is not None:
            t.shifted += max(int(m.group("cs_d")), 0)
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "context_shift",
                    f"n_keep = {m.group('cs_k').decode()}, n_left = {m.group('cs_l').decode()}, "
                    f"n_discard = {m.group('cs_d').decode()}")

    def _h_trunc(self, m, data, s):
        t = self._slot_task(m)
        n = int(m.group("tr_n"))
        t.truncated = True
        t.shifted = None
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "truncate",
                    f"prompt of {t.prompt_sent if t.prompt_sent is not None else '?'} tokens cut to {n}")
        t.prompt_len = n

    def _h_full(self, m, data, s):
        t = self._slot_task(m)
        self._event(self.n_steps + (1 if self.phase == 1 else 0), self._ts(data, s), t.key, "cache_hit",
                    "whole prompt cached; the last token is evaluated again")

    def _h_ptime(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._slot_task(m)
        t.t_pn = int(m.group("pt_n"))
        t.t_pms = float(m.group("pt_ms"))

    def _h_etime(self, m, data, s):
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._slot_task(m)
        t.t_en = int(m.group("et_n"))
        t.t_ems = float(m.group("et_ms"))

    def _h_thdr(self, m, data, s):
        if m.group("fn").strip() != b"print_timing" or m.group("th_pn") is None:
            return
        tid = int(m.group(3))
        if tid < 0:
            return
        t = self._slot_task(m)
        t.t_pn = int(m.group("th_pn"))
        t.t_pms = float(m.group("th_pms"))
        t.t_en = int(m.group("th_en"))
        t.t_ems = float(m.group("th_ems"))

    def _h_newslot(self, m, data, s):
        self.cfg.setdefault("n_ctx_slot", int(m.group("ns_c")))

    def _h_sother(self, m, data, s):
        e = m.end()
        msg = data[e:e + 40].lstrip(b" ")
        if not msg or msg.startswith(IGNORED_SLOT):
            tid = int(m.group(G_TID))
            if tid >= 0:   # a known line, ignored, still names its task and slot (not an unknown one)
                self._named(tid, int(m.group(G_SID)))
            return
        self._unparsed(data, s)

    # ------------------------------------------------------------------ srv / que handlers
    def _h_nfail(self, m, data, s):
        self.fail_pending = True
        step, t = max(self.n_steps, 1), self._ts(data, s)
        self._event(step, t, "", "kv_fail", f"no room in the KV cache for the call at offset {m.group('nf_o').decode()}")
        self._event(step, t, "", "batch_retry", f"retrying with n_batch = {m.group('nf_b').decode()}")

    def _h_ofail(self, m, data, s):
        self.fail_pending = True
        step, t = max(self.n_steps, 1), self._ts(data, s)
        self._event(step, t, "", "kv_fail", "no room in the KV cache for the batch")
        self._event(step, t, "", "batch_retry", f"retrying with n_batch = {m.group('of_b').decode()}")
        if self.phase == 2:
            self.st_attempts[-1] += 1

    def _step_error(self, msg: str, data, s) -> None:
        step = max(self.n_steps, 1)
        if step in self.failed_steps:
            return
        self.failed_steps.add(step)
        self._event(step, self._ts(data, s), "", "decode_error", msg)

    def _h_nctx(self, m, data, s):
        self._step_error(m.group("nctx").decode("utf-8", "replace").strip(), data, s)

    def _h_ofull(self, m, data, s):
        self._step_error(m.group("ofull").decode("utf-8", "replace").strip(), data, s)

    def _h_decerr(self, m, data, s):
        msg = m.group("de_msg").decode("utf-8", "replace").strip()
        stage = m.group("de_stage")   # newer builds: the step failed before or after llama_decode
        self._step_error(f"{stage.decode()}decode() failed: {msg}" if stage else msg, data, s)

    def _h_uother(self, m, data, s):
        e = m.end()
        msg = data[e:e + 40]
        if not msg.startswith(IGNORED_SRV):
            self._unparsed(data, s)

    def _h_dother(self, m, data, s):
        if not data.startswith(b"no tokens to decode", m.end()):   # an empty call (NEW warns, nothing to add)
            self._unparsed(data, s)

    def _h_senderr(self, m, data, s):
        t = self._task(int(m.group("se_t")))
        msg = m.group("se_msg").decode("utf-8", "replace").strip()
        t.error = msg
        ts = self._ts(data, s)
        self._event(max(self.n_steps, 1), ts, t.key, "error", msg[:200])
        mr = re.match(r"request \((\d{1,15}) tokens\)", msg)
        if mr and t.prompt_sent is None:
            t.prompt_sent = int(mr.group(1))
        if not t.launched:
            self._finish(t, ts, self.n_steps if self.n_steps else None)

    def _h_cancel(self, m, data, s):
        t = self._task(int(m.group("ca_t")))
        if t.finished:
            return
        t.cancelled = True
        ts = self._ts(data, s)
        self._event(max(self.n_steps, 1), ts, t.key, "cancel", "cancel requested (client gone or request ended)")
        if not t.launched:
            self._finish(t, ts, self.n_steps if self.n_steps else None)

    def _h_defer(self, m, data, s):
        t = self._task(int(m.group("df_t")))
        t.deferred += 1
        self._event(self.n_steps + 1, self._ts(data, s), t.key, "defer", m.group("df_why").decode())

    def _h_popdef(self, m, data, s):
        t = self._task(int(m.group("pd_t")))
        self._event(self.n_steps + 1, self._ts(data, s), t.key, "requeue", "a slot was released")

    def _h_arr(self, m, data, s):
        tid = int(m.group("ar_t"))
        t = self._task(tid)
        if t.arr_step is not None or t.launched:
            if not t.finished:
                return
            del self.cur_tasks[tid]
            t = self._task(tid)
        t.arr_step = self.n_steps
        t.began = True
        t.arr_t = self._ts(data, s)
        t.waiting = True
        self.waiting += 1
        self.arr_since += 1
        self.arr_cur.append(t)
        self._event(self.n_steps + 1, t.arr_t, t.key, "arrive", "queued")
