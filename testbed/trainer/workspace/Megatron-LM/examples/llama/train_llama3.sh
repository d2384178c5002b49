#!/bin/bash
# Simulated trainer (cvs-testbed test double) standing in for ROCm Megatron-LM's examples/llama/train_llama3.sh.
# Reads the same env vars (MBS, BS/GBS, TP, PP, SEQ_LENGTH, TOTAL_ITERS/TRAIN_ITERS, TE_FP8/PR, ...);
# only the GPUs and the training math are simulated. Like the real scripts, output is tee'd to ${LOG_DIR}/output_${EXP_NAME}.log (TRAIN_LOG is never honoured).
# This stands in for the 2026 script: it reads TE_FP4, TE_FP8_RECIPE and DATA_CACHE_PATH (the harness's
# launcher probe greps for them; Megatron-LM-v25.3/ holds the Feb-2025 script, which reads none of them).
export TE_FP4="${TE_FP4:-0}" TE_FP8_RECIPE="${TE_FP8_RECIPE:-}" DATA_CACHE_PATH="${DATA_CACHE_PATH:-}"
TRAIN_LOG="${LOG_DIR:+${LOG_DIR}/output_${EXP_NAME:-train}.log}"
export TRAIN_LOG
SIM_HERE="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
SIM_WORKSPACE="$(cd "$SIM_HERE/../../.." && pwd)"
export PYTHONDONTWRITEBYTECODE=1
exec env PYTHONPATH="$SIM_WORKSPACE${PYTHONPATH:+:$PYTHONPATH}" python3 -m simtrainer megatron llama3 "$@"
