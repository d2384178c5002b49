#!/bin/bash
# Simulated trainer (cvs-testbed test double) standing in for the Feb-2025 ROCm Megatron-LM
# examples/llama/train_llama3.sh (rocm_dev, about rocm/megatron-lm v25.3), docs/launch_contracts.md: it reads
# MBS, BS, TP, PP, SEQ_LENGTH, TOTAL_ITERS and TE_FP8 like the 2026 one, but not the MXFP names nor the
# dataset cache folder, so MXFP8 trains plain (delayed-scaling) FP8, MXFP4 trains BF16, and the cache
# folder is the script's own. A test selects it with train_params.megatron_root /workspace/Megatron-LM-v25.3.
# Only the GPUs and the training math are simulated. Output is tee'd to ${LOG_DIR}/output_${EXP_NAME}.log.
TRAIN_LOG="${LOG_DIR:+${LOG_DIR}/output_${EXP_NAME:-train}.log}"
export TRAIN_LOG
export SIM_SCRIPT_VERSION=2025.02
SIM_HERE="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
SIM_WORKSPACE="$(cd "$SIM_HERE/../../.." && pwd)"
export PYTHONDONTWRITEBYTECODE=1
exec env PYTHONPATH="$SIM_WORKSPACE${PYTHONPATH:+:$PYTHONPATH}" python3 -m simtrainer megatron llama3 "$@"
