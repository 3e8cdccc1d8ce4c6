"""What the tests that run the real vLLM share: its venv's interpreter, and their marks (skipped,
saying so, without .venv-vllm, which the README's test command builds)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PY = ROOT / ".venv-vllm" / "bin" / "python"


def marks(timeout_s: int) -> list:
    return [pytest.mark.vllm, pytest.mark.timeout(timeout_s),
            pytest.mark.skipif(not PY.exists(), reason="no .venv-vllm (the README's test command builds it: "
                                                        "servers/vllm/make_venv.sh)")]
