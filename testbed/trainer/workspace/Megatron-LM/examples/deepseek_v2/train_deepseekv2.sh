#!/bin/bash
# Simulated trainer (cvs-testbed test double) standing in for ROCm Megatron-LM's examples/deepseek_v2/train_deepseekv2.sh.
# Keeps the real script's contract (simtrainer/megatron_cli.py): reads MBS, GBS, TRAIN_ITERS, SEQ_LEN
# (default 2048, not SEQ_LENGTH), AC (default sel, not RECOMPUTE), PR; pins NNODES=1, NODE_RANK=0,
# MASTER_ADDR=localhost, TP=PP=1, MODEL_SIZE=16B, the tokenizer and --exit-interval 50.
# Only the GPUs and the training math are simulated. Like the real scripts, output is tee'd to ${LOG_DIR}/output_${EXP_NAME}.log (TRAIN_LOG is never honoured).
TRAIN_LOG="${LOG_DIR:+${LOG_DIR}/output_${EXP_NAME:-train}.log}"
export TRAIN_LOG
SIM_HERE="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
SIM_WORKSPACE="$(cd "$SIM_HERE/../../.." && pwd)"
export PYTHONDONTWRITEBYTECODE=1
exec env PYTHONPATH="$SIM_WORKSPACE${PYTHONPATH:+:$PYTHONPATH}" python3 -m simtrainer megatron deepseek "$@"
