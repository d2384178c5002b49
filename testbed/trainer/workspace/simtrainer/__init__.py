"""Simulated trainer: a test double of Megatron-LM / Primus pre-training (stdlib only).

It accepts the env vars and flags the harness passes, prints the real log line shapes, writes and
resumes checkpoint files, synchronises its nodes over TCP and injects named faults. Only the GPUs
and the training math are simulated.
"""
