"""The guard around each page's work: no browser user sees a traceback or a server path.

    from ui.guard import guarded
    guarded(st.navigation(PAGES).run)     # app.py: every page runs inside it

A page reports the failures it expects (a bad file, a run that cannot finish) with its own
plain st.error. Anything else that escapes a page is a bug: the full traceback goes to the
server's log (logger "scheduler_lab"), and the page shows one plain sentence in its place.
Streamlit's own control flow (st.stop, st.rerun, st.switch_page: ScriptControlException, a
BaseException) passes through untouched, and so does the marker a fragment raises once
Streamlit has shown its error (under client.showErrorDetails = "none", a generic line).
"""
from __future__ import annotations

import logging
from typing import Callable

import streamlit as st
from streamlit.errors import FragmentHandledException

LOG = logging.getLogger("scheduler_lab")

MESSAGE = ("This page stopped on an internal error ({kind}) and could not finish. The details are in "
           "the server's log; change the input or the settings, or reload the page, to try again.")


def report(exc: BaseException) -> None:
    """Log `exc` with its traceback; show the page's one-line message (the error's type only:
    its text may hold a file path or a piece of the input)."""
    LOG.error("page failed: %s", type(exc).__name__, exc_info=exc)
    st.error(MESSAGE.format(kind=type(exc).__name__), icon=":material/error:")


def guarded(run: Callable[[], object]) -> None:
    """Call run() (a page); an exception it raises is logged and shown as one plain line."""
    try:
        run()
    except FragmentHandledException:
        raise   # Streamlit has already reported it (its own handler, honouring showErrorDetails)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: every page error ends here
        report(exc)
