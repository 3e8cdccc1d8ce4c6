"""ui.labels' text helpers: what a user or a log wrote reaches the page as written, never as
markdown's links or HTML, and the page's own wording stays as it is."""
from __future__ import annotations

import pytest

from ui.labels import inert, plain


WJ = "\u2060"   # the word joiner inert() puts where GFM would autolink


@pytest.mark.parametrize("text, want", [
    ("[Log in again](https://evil.example)", f"\\[Log in again\\](https{WJ}://evil.example)"),
    ("![](https://evil.example/t.png)", f"!\\[\\](https{WJ}://evil.example/t.png)"),
    ("<https://evil.example> and <script>x</script>", f"\\<https{WJ}://evil.example\\> and \\<script\\>x\\</script\\>"),
    ("see www.evil.example or me@evil.example", f"see www{WJ}.evil.example or me{WJ}@evil.example"),
    ("\\[x\\](https://y)", f"\\\\\\[x\\\\\\](https{WJ}://y)"),   # a user's own backslash cannot undo the escape
    ("line\nbreak\x00", "line break "),
])
def test_inert_defuses_links_images_autolinks_and_html(text, want):
    """Backslash escapes do not stop GFM's autolinks (remark-gfm finds them after escapes are
    taken out: checked with remark-parse 11 + remark-gfm 4, the parser Streamlit's markdown
    uses); a word joiner after the scheme and "www", and before "@", does."""
    assert inert(text) == want
    assert WJ in plain(text) or not any(k in text for k in ("://", "www.", "@"))


def test_inert_leaves_the_page_s_own_wording_as_it_is():
    msg = "Ignored a setting in the link: fleet_replicas must be from 1 to 64 (a whole number), not 'x'."
    assert inert(msg) == msg
    assert plain("a.b") == "a\\.b"   # plain escapes every special: for text that is a name alone
