"""The server's data folder (ui/data_dir.py): only names from its listing open, nothing outside
the folder is reachable (traversal, symlinks out), a folder of thousands of files lists fast and
capped, and odd names are plain names."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ui import data_dir
from ui.data_dir import RECORDINGS, data_folder, list_files, resolve


@pytest.fixture()
def folder(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    (d / "a.jsonl").write_text('{"kind": "header"}\n')
    (d / "b.jsonl.gz").write_bytes(b"\x1f\x8b")
    (d / "notes.md").write_text("not offered")
    (d / ".hidden.jsonl").write_text("x")
    (d / "sub.jsonl").mkdir()   # a folder named like a recording is not a file
    (tmp_path / "secret.jsonl").write_text("outside")
    return d


def test_the_env_var_names_the_folder_and_anything_else_is_none(folder, tmp_path):
    assert data_folder({"SCHEDLAB_DATA_DIR": str(folder)}) == folder.resolve()
    assert data_folder({}) is None and data_folder({"SCHEDLAB_DATA_DIR": " "}) is None
    assert data_folder({"SCHEDLAB_DATA_DIR": str(tmp_path / "missing")}) is None
    assert data_folder({"SCHEDLAB_DATA_DIR": str(folder / "a.jsonl")}) is None   # a file, not a folder


def test_only_regular_files_of_the_kinds_asked_are_listed(folder):
    ls = list_files(folder, RECORDINGS)
    assert [e.name for e in ls.entries] == sorted([e.name for e in ls.entries], key=lambda n: -os.stat(folder / n).st_mtime) \
        and {e.name for e in ls.entries} == {"a.jsonl", "b.jsonl.gz"}
    assert ls.left_out == 0 and ls.note() == ""
    assert next(e for e in ls.entries if e.name == "a.jsonl").size == len('{"kind": "header"}\n')
    assert "notes.md" not in ls.names and "notes.md" in {e.name for e in list_files(folder, (".md",)).entries}


@pytest.mark.parametrize("name", ["../secret.jsonl", "/etc/passwd", "a.jsonl/../../secret.jsonl", "..", ".",
                                  "sub.jsonl", "notes.md", ".hidden.jsonl", "a.jsonl\x00", None, 3, ["a.jsonl"]])
def test_a_name_not_in_the_listing_is_refused_with_one_sentence(folder, name):
    ls = list_files(folder, RECORDINGS)
    with pytest.raises(ValueError) as e:
        resolve(folder, ls, name)
    msg = str(e.value)
    assert "\n" not in msg and len(msg) <= 200 and "listing" in msg


def test_a_listed_name_opens_the_file_inside(folder):
    ls = list_files(folder, RECORDINGS)
    assert resolve(folder, ls, "a.jsonl") == (folder / "a.jsonl").resolve()


def test_a_symlink_that_leads_out_is_neither_listed_nor_opened(folder, tmp_path):
    (folder / "out.jsonl").symlink_to(tmp_path / "secret.jsonl")
    (folder / "in.jsonl").symlink_to(folder / "a.jsonl")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    (folder / "dangling.jsonl").symlink_to(folder / "gone.jsonl")
    ls = list_files(folder, RECORDINGS)
    assert "out.jsonl" not in ls.names and "loop.jsonl" not in ls.names and "dangling.jsonl" not in ls.names
    assert "in.jsonl" in ls.names and resolve(folder, ls, "in.jsonl") == (folder / "a.jsonl").resolve()


def test_a_file_swapped_for_a_symlink_out_after_the_listing_is_refused(folder, tmp_path):
    ls = list_files(folder, RECORDINGS)
    (folder / "a.jsonl").unlink()
    (folder / "a.jsonl").symlink_to(tmp_path / "secret.jsonl")
    with pytest.raises(ValueError, match="no longer a file inside"):
        resolve(folder, ls, "a.jsonl")
    (folder / "b.jsonl.gz").unlink()
    with pytest.raises(ValueError, match="no longer a file inside"):
        resolve(folder, ls, "b.jsonl.gz")


def test_thousands_of_files_list_fast_capped_newest_first(tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    n = 5000
    for k in range(n):
        p = d / f"rec-{k:05d}.jsonl"
        p.write_bytes(b"")
        os.utime(p, (1_700_000_000 + k, 1_700_000_000 + k))   # rec-04999 newest
    for k in range(300):
        (d / f"other-{k}.bin").write_bytes(b"")   # not a recording: not counted as left out
    t = time.perf_counter()
    ls = list_files(d, RECORDINGS, limit=200)
    took = time.perf_counter() - t
    assert [e.name for e in ls.entries[:3]] == ["rec-04999.jsonl", "rec-04998.jsonl", "rec-04997.jsonl"]
    assert len(ls.entries) == 200 and ls.entries[-1].name == "rec-04800.jsonl"
    assert ls.left_out == n - 200 and "4,800 older file(s) are not listed" in ls.note()
    assert took < 1.0, f"listing 5,300 files took {took:.2f} s"
    with pytest.raises(ValueError):   # an older file exists but was not offered
        resolve(d, ls, "rec-00000.jsonl")


def test_odd_names_are_plain_names(folder):
    odd = ["<img src=x onerror=alert(1)>.jsonl", "**bold** [x](y).jsonl", "naïve \u202etxt.jsonl", "a b\tc.jsonl"]
    for name in odd:
        (folder / name).write_bytes(bytes(range(256)))   # binary content: the reader says so, not the listing
    (folder / ("x" * 240 + ".jsonl")).write_bytes(b"")
    ls = list_files(folder, RECORDINGS)
    for name in odd:
        assert name in ls.names and resolve(folder, ls, name).name == name
    assert ("x" * 240 + ".jsonl") in ls.names


def test_an_unreadable_or_missing_folder_lists_nothing(tmp_path):
    ls = list_files(tmp_path / "missing", RECORDINGS)
    assert ls.entries == () and ls.left_out == 0


def test_sizes_read_as_people_write_them():
    assert data_dir.size_text(12) == "12 B" and data_dir.size_text(340_000) == "340.0 kB"
    assert data_dir.size_text(1_234_567_890) == "1.2 GB"
