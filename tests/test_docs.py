"""The front door (issue 29): the README stays short (a test, not a hope), keeps its two set-up
commands verbatim, and every link in it and in docs/ resolves, file and anchor; each docs page
opens on a table of contents of its sections; no source points a reader at a README section."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 250
DASHBOARD = ("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt && .venv/bin/python serve.py")
TESTS = ("python3 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt && bash servers/vllm/make_venv.sh"
         " && .venv/bin/python -m pytest")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _without_code(text: str) -> str:
    """The text with fenced code blocks and inline code spans blanked (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "``", text)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation but - and _
    dropped, spaces to -, a repeat suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    for m in re.finditer(r"^#{1,6} (.+?)\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_the_readme_stays_short():
    n = len(README.read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md is {n} lines; at most {MAX_README_LINES}: move detail to docs/"


def test_the_readme_keeps_its_two_setup_commands_verbatim():
    lines = README.read_text().splitlines()
    assert lines.count(DASHBOARD) == 1 and lines.count(TESTS) == 1   # .ci/run checks the second too
    commands = [x for x in lines if x.startswith("python3 -m venv .venv")]
    assert commands == [DASHBOARD, TESTS], commands


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves_to_a_file_and_its_anchor(path):
    text = _without_code(path.read_text())
    links = LINK.findall(text) + IMAGE.findall(text)
    bad = []
    for target in links:
        if re.match(r"^[a-z]+:", target):   # http(s), mailto: not checked here (no network)
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(ROOT) if ROOT in dest.parents else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not bad, bad


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_each_docs_page_opens_on_a_table_of_contents(path):
    text = path.read_text()
    headings = re.findall(r"^## (.+?)\s*$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), flags=re.M)
    if not headings:
        pytest.skip("no sections")
    before = text.split("\n## ", 1)[0]
    toc = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", before, flags=re.M)
    own = anchors(path)
    assert toc and set(toc) <= own, (toc, sorted(own))
    missing = [h for h in headings if re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") not in toc]
    assert not missing, f"{path.name}: sections not in its table of contents: {missing}"


def test_the_docs_the_readme_names_are_all_linked_from_it():
    text = README.read_text()
    unlinked = [p.name for p in DOCS if f"(docs/{p.name}" not in text]
    assert not unlinked, unlinked


SOURCES = ["app.py", "serve.py", "pages", "ui", "figures", "sim", "servers", "engine"]


def _source_files():
    for name in SOURCES:
        p = ROOT / name
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")))


def test_sources_point_at_docs_not_at_readme_sections():
    """Help texts and messages link the docs; a docs/X.md#anchor they name exists."""
    bad = []
    for f in _source_files():
        text = f.read_text(errors="replace")
        if re.search(r"README(\.md)?#", text):
            bad.append(f"{f.relative_to(ROOT)}: links a README section")
        for doc, anchor in re.findall(r"docs/([\w.-]+\.md)(?:#([\w-]+))?", text):
            dest = ROOT / "docs" / doc
            if not dest.exists():
                bad.append(f"{f.relative_to(ROOT)}: docs/{doc} does not exist")
            elif anchor and anchor not in anchors(dest):
                bad.append(f"{f.relative_to(ROOT)}: docs/{doc}#{anchor} has no such heading")
    assert not bad, bad
