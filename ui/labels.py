"""Words and number formats shared by the pages.

    from ui.labels import POLICY_LABELS, SCHEDULER_LABELS, fmt, plain
    st.selectbox("Policy", list(POLICIES), format_func=lambda p: POLICY_LABELS.get(p, p))
    st.metric("Mean TTFT", fmt(m["ttft_mean"]))
"""
from __future__ import annotations

import math
import re

POLICY_LABELS = {"fcfs": "FCFS (vLLM default)", "priority": "Priority (vLLM)", "spf": "Shortest prompt first",
                 "sjf": "Shortest job first", "priority_aging": "Priority with aging",
                 "round_robin": "Round-robin by tenant", "vtc": "Virtual Token Counter (fair share)",
                 "edf": "Earliest TTFT deadline first", "sjf_predicted": "Shortest job first (predicted length)",
                 "short_long": "Short and long prompts apart"}
SCHEDULER_LABELS = {"vllm": "vLLM v1 (continuous batching)", "static": "Static batching (request-level)",
                    "llama_slots": "llama-server slots"}


def fmt(v, unit: str = "", digits: int = 3) -> str:
    """A number for people: 3 significant digits below 1,000, thousands separators, "–" for NaN/None."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        s = f"{v:,.{digits}g}" if abs(v) < 10 ** digits else f"{v:,.0f}"
    else:
        s = f"{v:,}"
    return f"{s} {unit}".strip()


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


_WJ = "\u2060"   # the word joiner: invisible, and it breaks the runs GFM's autolinks look for
# where GFM would make a bare link: a scheme's "://", "www.", an e-mail's "@". Backslash escapes
# do not stop these (remark-gfm finds them after escapes are taken out), a word joiner does.
_AUTOLINK = re.compile(r"(?<=[A-Za-z0-9])(?=://)|(?<=\bwww)(?=\.)|(?=@)", re.IGNORECASE)
_LINKISH = re.compile(r"([\\\[\]<>])")


def _no_autolinks(text: str) -> str:
    return _AUTOLINK.sub(_WJ, text)


def plain(text) -> str:
    """Text from a log, a recording or a user made inert for st.markdown (no links, emphasis,
    colour tags): control characters become spaces, markdown's specials are escaped, and a word
    joiner breaks what GFM would autolink (see inert)."""
    return _MD_SPECIAL.sub(r"\\\1", _no_autolinks(re.sub(r"[\x00-\x1f\x7f]", " ", str(text))))


def inert(text) -> str:
    """A whole message that may quote a user's value (a link's setting, an upload's field or
    name) made safe for st.error / st.warning / st.markdown, its own wording left as it is: no
    link, image, autolink, e-mail link or HTML can come out of it (\\, [, ], <, > escaped; a word
    joiner, U+2060, after a scheme and "www" and before "@"). plain() escapes every markdown
    special as well."""
    return _LINKISH.sub(r"\\\1", _no_autolinks(re.sub(r"[\x00-\x1f\x7f]", " ", str(text))))


def short_name(name, at_most: int = 32) -> str:
    """A file's name as a one-line message shows it: no control characters, at most `at_most`
    characters (a refusal stays one short line, whatever the upload was called)."""
    name = re.sub(r"[\x00-\x1f\x7f]", " ", str(name))
    return name if len(name) <= at_most else name[:at_most - 1] + "…"
