#!/usr/bin/env bash
# The CUDA check, for a machine with an NVIDIA GPU: the tests marked `cuda` (CUDA against CPU runs,
# a ring over nccl or threads, codecs on CUDA tensors), then `adass bench dml --quick --device cuda`.
# Everything it prints goes to $OUT too: pytest-cuda.txt (and .xml), bench-dml.txt and bench/dml.md.
# Run it through `make device-check`, which creates .venv first (`make setup`).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
OUT=${OUT:-device-check-out}
BIN="$VENV/bin"
if [ ! -x "$BIN/adass" ]; then
    echo "device-check: no $BIN/adass; run make setup (or make device-check) first" >&2
    exit 2
fi
mkdir -p "$OUT"
# stop at once, in one line, where there is no GPU: every test below would skip
"$BIN/python" - <<'PY' | tee "$OUT/device.txt"
import sys

import torch
import torch.distributed as dist

if not torch.cuda.is_available():
    sys.exit(f"device-check: torch {torch.__version__} sees no CUDA GPU (torch.cuda.is_available() is False)")
names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, nccl {dist.is_nccl_available()}: {names}")
PY
status=0
"$BIN/python" -m pytest -m cuda -q -rs -p no:cacheprovider --junitxml "$OUT/pytest-cuda.xml" tests \
    2>&1 | tee "$OUT/pytest-cuda.txt" || status=$?
"$BIN/adass" bench dml --quick --device cuda --out "$OUT/bench" --overwrite \
    2>&1 | tee "$OUT/bench-dml.txt" || status=$?
echo "device-check: tests and bench written to $OUT (exit status $status)"
exit "$status"
