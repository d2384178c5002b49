"""Benchmarks of issue #8: parse throughput, polling cost, feedback latency, fan-out, report rendering.

Run them with ``invoke bench`` or ``python -m benchmarks`` (see ``benchmarks.suite``).
"""
