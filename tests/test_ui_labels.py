"""ui.labels' text helpers: what a user or a log wrote reaches the page as written, never as
markdown's links or HTML, and the page's own wording stays as it is."""
from __future__ import annotations

import pytest

from ui.labels import inert, plain


@pytest.mark.parametrize("text, want", [
    ("[Log in again](https://evil.example)", "\\[Log in again\\](https\\://evil.example)"),
    ("![](https://evil.example/t.png)", "!\\[\\](https\\://evil.example/t.png)"),
    ("<https://evil.example> and <script>x</script>", "\\<https\\://evil.example\\> and \\<script\\>x\\</script\\>"),
    ("see www.evil.example or me@evil.example", "see www\\.evil.example or me\\@evil.example"),
    ("\\[x\\](https://y)", "\\\\\\[x\\\\\\](https\\://y)"),   # a user's own backslash cannot undo the escape
    ("line\nbreak\x00", "line break "),
])
def test_inert_defuses_links_images_autolinks_and_html(text, want):
    assert inert(text) == want


def test_inert_leaves_the_page_s_own_wording_as_it_is():
    msg = "Ignored a setting in the link: fleet_replicas must be from 1 to 64 (a whole number), not 'x'."
    assert inert(msg) == msg
    assert plain("a.b") == "a\\.b"   # plain escapes every special: for text that is a name alone
