"""The data folder's picker in a page's sidebar (Streamlit side of ui/data_dir.py).

    chosen = FolderPicker("keep_sl_file", data_dir.LOGS, "logs")
    SETTINGS = PageSettings("sl", [..., chosen.setting()])
    with st.sidebar:
        chosen.draw(disabled=up is not None)     # nothing when the server has no data folder
    data, name, size, key = chosen.source(up, SAMPLE_DIR / fname)   # what the page reads, and its cache key

The URL keeps the name; a name the listing does not hold (a link from another server, a file
moved out) falls back to none, with a caption saying so. The vLLM server page draws its own
(it adds following a file as it is written), on the same rules.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import streamlit as st

from ui import data_dir
from ui.labels import inert
from ui.state import Setting

NO_FILE = ""


def path_key(path: Path) -> str:
    """A data-folder file by what changes when it does (a file written on gets a new key)."""
    s = os.stat(path)
    return f"file:{path.name}:{s.st_size}:{s.st_mtime_ns}:{s.st_ino}"


class FolderPicker:
    def __init__(self, key: str, kinds: tuple[str, ...], what: str):
        self.key, self.kinds, self.what = key, kinds, what
        self.folder = data_dir.data_folder()
        self.listing = data_dir.list_files(self.folder, self.kinds) if self.folder is not None else None
        self.name = NO_FILE

    def setting(self) -> Setting:
        return Setting(self.key, NO_FILE, str)

    def draw(self, *, disabled: bool = False) -> str:
        """The selectbox (when the server has a data folder); the chosen name, or ''."""
        ss = st.session_state
        if self.listing is None:
            st.caption(f"Bigger than the upload cap? Start the dashboard with {data_dir.ENV}=FOLDER: the "
                       f"{self.what} in it are listed here.")
            return NO_FILE
        names = [NO_FILE] + [e.name for e in self.listing.entries]
        if ss.get(self.key) not in names:
            if ss.get(self.key):
                st.caption("The file the link named is not in the data folder's listing.")
            ss[self.key] = NO_FILE
        sizes = {e.name: data_dir.size_text(e.size) for e in self.listing.entries}
        st.selectbox("Or a file in the server's data folder", names, key=self.key, disabled=disabled,
                     format_func=lambda n: "(none)" if n == NO_FILE else f"{n} · {sizes[n]}",
                     help=f"The {self.what} in the folder the dashboard was started with ({data_dir.ENV}), "
                          f"newest first: no upload cap. {len(self.listing.entries):,} listed.")
        if self.listing.note():
            st.caption(self.listing.note())
        self.name = NO_FILE if disabled else ss[self.key]
        return self.name

    def path(self) -> Path:
        """The chosen file's path, checked again (ValueError: one plain sentence)."""
        return data_dir.resolve(self.folder, self.listing, self.name)

    def source(self, upload, sample: Path):
        """(what to read, its name, its size in bytes, a cache key): the upload, else the folder's
        chosen file (its path: the reader opens it, to its own caps), else the sample's bytes. A
        chosen file that went away stops the page with one sentence."""
        from ui import primer

        if upload is not None or not self.name:
            data, name = (upload.getvalue(), upload.name) if upload is not None else (sample.read_bytes(), sample.name)
            return data, name, len(data), f"{name}:{len(data)}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"
        try:
            path = self.path()
            return path, self.name, path.stat().st_size, path_key(path)
        except (ValueError, OSError) as e:
            st.error(inert(str(e)[:200]) if isinstance(e, ValueError) else "The file could not be read.",
                     icon=":material/error:")
            primer.stop()
