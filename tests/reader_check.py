"""read_llama_log for the reader's tests: every input the tests re-read is parsed by both
tokenizers (the C one, servers/llama_server/llamascan.c, and the regexes it must agree with), and
the two Traces must be byte-identical. Bytes are also read as a binary stream: the reader's thread
then reads and tokenizes ahead (servers.llama_server.blocks.prefetched_blocks), and that Trace must
be byte-identical too. Test modules import `read_llama_log` from here instead of
servers.llama_server."""
from __future__ import annotations

import io
import os

from servers.llama_server import native
from servers.llama_server import read_llama_log as _read

REREADABLE = (str, os.PathLike, bytes, bytearray, memoryview, list, tuple)


def read_llama_log(source, **kw):
    assert native.llamascan() is not None, f"the native tokenizer is not available: {native.why_unavailable()}"
    trace = _read(source, **kw)
    if isinstance(source, REREADABLE):   # streams and iterators are read once
        kw.pop("progress", None)
        ref = _read(source, native=False, **kw)
        assert trace.to_bytes() == ref.to_bytes(), "the C and regex tokenizers gave different Traces"
        if isinstance(source, (bytes, bytearray, memoryview)):
            ahead = _read(io.BytesIO(bytes(source)), **kw)
            assert ahead.to_bytes() == ref.to_bytes(), "reading ahead on a thread gave a different Trace"
    return trace
