#!/usr/bin/env bash
# The engine's GPU checks, as one prepared run for a lent GPU machine (the `device` tool runs it
# in a copy of this repo; its python3 already holds torch, transformers, pandas and pytest):
#
#   bash bench/device_check.sh        # writes its logs and JSON under $OUT (or ./device_out)
#
# 1. the correctness suite on CUDA: paged attention against the float64 dense reference, and the
#    engine's greedy tokens against HF transformers in float64 under every scheduling condition
#    (ENGINE_TEST_DEVICE=cuda; the references stay on the CPU);
# 2. the benchmark in bfloat16 on CUDA: tokens/s against HF generate() static batching (token
#    agreement reported, not asserted: bf16 GPU kernels may break argmax ties apart), step time
#    against batch size with the H200's memory-bandwidth roofline, paged vs contiguous attention;
# 3. the ~125M preset's step-time curve against the same roofline;
# 4. the FlexAttention backend (engine/attention_flex.py, compiled on CUDA): its self-test, the
#    decode attention against the gather path and a contiguous cache, and the step-time curve.
# Sized for at most 9 minutes of an H200 (the parts' timeouts add up to 540 s; six files come
# back under $OUT); every part runs even if an earlier one fails.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-device_out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 ENGINE_TEST_DEVICE=cuda
py=python3
$py -c "import torch, transformers, pandas, numpy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', '| transformers', transformers.__version__,
      '| pandas', pandas.__version__, '| numpy', numpy.__version__)" 2>&1 | tee "$out/versions.txt"
timeout 150 $py -m pytest -q -p no:cacheprovider -o addopts= tests/test_engine_attention.py tests/test_engine_hf.py \
  tests/test_engine_flex.py \
  2>&1 | tee "$out/cuda_tests.log" | tail -5
timeout 150 $py bench/bench_engine.py --device cuda --dtype bfloat16 --hardware h200 --repeat 3 2>&1 | tee "$out/bench_cuda_tiny.log"
timeout 60 $py bench/bench_engine.py --model m100 --device cuda --dtype bfloat16 --hardware h200 --only steps \
  --repeat 5 2>&1 | tee "$out/steps_cuda_m100.log"
timeout 120 $py bench/bench_engine.py --device cuda --dtype bfloat16 --hardware h200 --attention flex \
  --only attention --repeat 3 2>&1 | tee "$out/flex_attention_cuda.log"
timeout 60 $py bench/bench_engine.py --device cuda --dtype bfloat16 --hardware h200 --attention flex \
  --only steps --repeat 5 2>&1 | tee "$out/flex_steps_cuda.log"
