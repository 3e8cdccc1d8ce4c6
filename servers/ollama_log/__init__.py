"""Ollama server logs (`ollama serve`): gin's line per request, the server's settings and version,
read into servers.server_log's LogRead (lines.py: the lines; reader.py: the reader). The llama.cpp
runner's own lines, where a log holds them, are the llama-server reader's."""
from .reader import OllamaLogReader


def read_ollama_log(src, name: str = ""):
    """An Ollama log (path, bytes or binary stream; plain or gzip) -> LogRead."""
    return OllamaLogReader(name).read(src)


__all__ = ["OllamaLogReader", "read_ollama_log"]
