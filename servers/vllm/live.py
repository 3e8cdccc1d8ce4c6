"""A recording read while the recorder writes it: the follower's complete lines fed to the
streaming reader, and the simulator's verdict kept up to date on a budget.

    live = LiveRecording(path, name)
    live.poll()                 # each page refresh (about a second): new steps read, never waiting
    trace = live.trace()        # the run so far (None before its header has come)
    live.notes, live.stopped    # sentences for the page: a rotation or restart; why it stopped
    v = live.verdict.get(live)  # the simulator's verdict on the run so far, recomputed on a budget

The verdict is kept up to date step by step (live_check.LiveDecisions: the simulator's state is
kept between refreshes and only the new steps are simulated and compared), so it follows the
recording every refresh, however long the run. So is the time prediction (live_predict.
LivePrediction): the cost model is fitted on the run so far again each time the run has doubled,
and between fits the wall-clock simulation goes on from where it was, only the new steps made. No
Streamlit here.
"""
from __future__ import annotations

import time

import pandas as pd

from sim.metrics import summary

from .follow import RecordingLines
from .live_check import LiveDecisions
from .live_predict import PREDICT_BUDGET_S, REFIT_FACTOR, LivePrediction
from .recording import RecordingRestarted, RecordingStream

POLL_BUDGET_S = 0.3        # reading per refresh at most; a file far ahead is caught up over refreshes
MAX_NOTES = 5
VERDICT_BUDGET_S = 1.0   # simulating per refresh at most: catching up on a long file goes on over refreshes
TRACE_FACTOR = 3.0         # the run's Trace is rebuilt at most every 3x what building it took
# text followed at most: the reader holds ~7 MB per MB of text (bench/bench_upload_cap.py), so about
# 2.2 GB; a busy server's hour (360,000 steps of ~0.8 KB) is ~280 MB
MAX_LIVE_TEXT_BYTES = 320 << 20


class LiveRecording:
    """One followed file, read on as it grows (see the module's docstring)."""

    def __init__(self, path, name: str = ""):
        self.path, self.name = path, name
        self.lines = RecordingLines(path, max_text_bytes=MAX_LIVE_TEXT_BYTES)
        self.stream: RecordingStream | None = None
        self.notes: list[str] = []
        self.stopped: str | None = None
        self.generation = 0          # +1 each time the reader starts over (a file replaced, truncated)
        self.last_new = None         # time.monotonic() when the last new steps came
        self.polls = 0
        self.verdict = LiveVerdict()
        self._trace = None
        self._built = self._trace_cost = 0.0
        self._summary = None
        self.fed = 0                 # lines fed to the reader (what the cached trace was made of)

    # ------------------------------------------------------------------ reading
    def note(self, text: str) -> None:
        if text and (not self.notes or self.notes[-1] != text):
            self.notes = (self.notes + [text])[-MAX_NOTES:]

    def poll(self, budget_s: float = POLL_BUDGET_S) -> int:
        """Read what was written since the last poll (up to budget_s of work); the new steps."""
        if self.stopped:
            return 0
        self.polls += 1
        new = 0
        end = time.monotonic() + budget_s
        while True:
            got = self.lines.poll()
            if got.restart:
                self.stream = None
                self.generation += 1
                self.verdict = LiveVerdict()
            if got.note:
                self.note(got.note)
            if got.lines:
                new += self._feed(got.lines)
            if self.lines.stopped and not self.stopped:
                self.stopped = self.lines.stopped
            if self.stopped or not self.lines.behind or time.monotonic() >= end:
                break
        if new:
            self.last_new = time.monotonic()
        return new

    def _feed(self, lines: list[bytes]) -> int:
        if self.stream is None:
            self.stream = RecordingStream(name=self.name)
        self.fed += len(lines)
        try:
            return int(self.stream.feed(lines) or 0)
        except RecordingRestarted as e:   # a second header: what came before stays on the page
            self.stopped = str(e)
        except ValueError as e:           # the file is no recording (its first line)
            self.stopped = str(e)
            if self.stream.num_steps == 0:
                self.stream = None   # nothing of it to show
        return 0

    @property
    def behind(self) -> bool:
        """More is written than the last poll read (catching up with a long file)."""
        return self.lines.behind

    @property
    def num_steps(self) -> int:
        return int(self.stream.num_steps) if self.stream is not None else 0

    @property
    def recording(self):
        return self.stream.recording if self.stream is not None else None

    def trace(self):
        """The run so far: the same object until more lines come (two views of a page share it),
        and made again at most every TRACE_FACTOR x its last cost. Making it works out only the new
        steps' rows (RecordingStream.trace keeps the columns) and puts the tables together from
        them: 0.3-0.4 s at 100,000 steps here (load ~5), so a long run's numbers and charts lag the
        step count by about a second."""
        if self.stream is None or self.stream.header is None:
            return None
        at = (self.generation, self.fed)
        now = time.monotonic()
        if self._trace is None or self._trace[0][0] != at[0] or (
                self._trace[0] != at and now - self._built >= TRACE_FACTOR * self._trace_cost):
            t = time.monotonic()
            self._trace = (at, one_id_set(self.stream.trace()))
            self._built = time.monotonic()
            self._trace_cost = self._built - t
        return self._trace[1]

    def summary(self) -> dict | None:
        """sim.metrics.summary of trace(), made once per Trace (0.2 s for 145,000 steps)."""
        tr = self.trace()
        if tr is None:
            return None
        if self._summary is None or self._summary[0] is not tr:
            self._summary = (tr, summary(tr))
        return self._summary[1]

    def close(self) -> None:
        self.lines.close()


def one_id_set(tr):
    """The trace with every table's request ids under one category set. A run still going has
    requests that arrived but were never scheduled: the events' ids then are not the batch's, and
    a merge by request (figures.playback's preemption marks) refuses two category sets. (Asked of
    the reader in /tmp/issue27/requests-live.md; harmless once it gives one set.)"""
    cols = [(t, getattr(tr, t)) for t in ("requests", "batch", "events", "kv")]
    cats = [df["request"].cat.categories for _, df in cols
            if "request" in df.columns and isinstance(df["request"].dtype, pd.CategoricalDtype)]
    if len(cats) < 2 or all(c.equals(cats[0]) for c in cats[1:]):
        return tr
    union = cats[0]
    for c in cats[1:]:
        union = union.union(c)
    for _, df in cols:
        if "request" in df.columns and isinstance(df["request"].dtype, pd.CategoricalDtype):
            df["request"] = df["request"].cat.set_categories(union)
    return tr


class LiveVerdict:
    """The simulator's verdict on the run so far, kept up to date as steps come (LiveDecisions),
    and the time prediction, likewise (LivePrediction)."""

    def __init__(self):
        self.check = LiveDecisions()
        self.times = LivePrediction()
        self.result: dict | None = None     # decisions(), with "so_far" and "at_steps"
        self.prediction = None              # compare.Prediction (no band) or None
        self.error: str | None = None
        self.predict_error: str | None = None
        self.at_steps = 0                   # the steps the verdict was made on
        self.cost_s = 0.0                   # the last verdict update's time
        self.predict_cost_s = 0.0           # the last prediction update's time

    @property
    def predicted_at(self) -> int:
        """The steps the prediction shown was made on."""
        return self.times.at_steps

    @property
    def fitted_at(self) -> int:
        """The steps its cost model was fitted on."""
        return self.times.fitted_at

    @property
    def refitting(self) -> bool:
        """A model fitted on more steps is catching up (the last prediction stays until it has)."""
        return self.times.refitting

    def update(self, live: LiveRecording, *, predict_times: bool = False) -> bool:
        """The verdict on the steps read (when new ones came) and the prediction (when asked);
        True when either is new."""
        rec, steps = live.recording, live.num_steps
        if rec is None:
            return False
        made = False
        ended = bool(getattr(rec, "ended", False))
        if steps != self.at_steps or self.result is None or self.result.get("so_far") == ended or \
                self.result.get("behind"):
            t = time.monotonic()
            try:
                v = self.check.update(rec, VERDICT_BUDGET_S)
                d = v.get("first_difference")
                # a run still going: the simulator finishes requests the server is still running
                # (more steps than recorded); only steps both made are held to each other
                if not ended and d is not None and d.get("field") == "steps" and v["simulated_steps"] > v["steps"]:
                    v = {**v, "equal": True, "first_difference": None}
                v["so_far"] = not ended
                self.result, self.error = v, None
            except (ValueError, RuntimeError) as e:   # one sentence; the playback stands
                self.error = str(e)
            self.at_steps = steps
            self.cost_s = time.monotonic() - t
            made = True
        if predict_times and self.error is None:
            t = time.monotonic()
            before = self.prediction
            try:
                self.prediction = self.times.update(rec, live.trace(), PREDICT_BUDGET_S)
                self.predict_error = None
            except (ValueError, RuntimeError) as e:
                self.predict_error = str(e)
            self.predict_cost_s = time.monotonic() - t
            made = made or self.prediction is not before
        return made

