"""Dialects seen in the field: Megatron-DeepSpeed step times in seconds, the arguments dump behind
launcher prefixes, Primus' logged dump, and multi-node ROCm launcher summaries.

Every line below is written for these tests in the shapes of docs/log_formats.md#the-iteration-line and the issue.
"""

import pytest

from cvs_tasks.metrics import LogParser


def parse(text: str, **kwargs) -> LogParser:
    parser = LogParser(**kwargs)
    parser.feed(text)
    parser.finish()
    return parser


def deepspeed_line(step, total, seconds, tgs=None, tflops=7.94, prefix=""):
    tail = f" tokens per gpu per second (tgs): {tgs:.3f} |" if tgs is not None else ""
    return (f"{prefix} iteration {step:8d}/{total:8d} | consumed samples: {step * 512:12d} | consumed tokens: "
            f"{step * 512 * 2048:12d} | elapsed time per iteration (s): {seconds:.2f} | learning rate: 6.000E-05 | "
            f"global batch size:   512 | lm loss: {3.0 - step / 1000:.6E} | loss scale: 4096.0 | grad norm: 0.434 | "
            f"num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 | "
            f"samples per second: {512 / seconds:.3f} |{tail} TFLOPs: {tflops:.2f} |\n")


DUMP_ROWS = [("accumulate_allreduce_grads_in_fp32", "False"), ("data_path", "['/data/oscar/meg-gpt2_text_document']"),
             ("global_batch_size", "512"), ("micro_batch_size", "1"), ("num_layers", "70"),
             ("seq_length", "2048"), ("tensor_model_parallel_size", "4"), ("train_iters", "None"),
             ("world_size", "384")]


def megatron_dump(prefix: str) -> str:
    rows = [f"{prefix}------------------------ arguments ------------------------\n"]
    rows += [f"{prefix}  {k} {'.' * (48 - len(k))} {v}\n" for k, v in DUMP_ROWS]
    rows.append(f"{prefix}-------------------- end of arguments ---------------------\n")
    return "".join(rows)


def test_deepspeed_seconds_tflops_and_tgs_become_ms_throughput_and_tokens():
    text = "".join(deepspeed_line(s, 40, 106.4 + (s % 2) / 10, tgs=134.5 + s % 2, tflops=7.9 + (s % 2) / 100)
                   for s in range(1, 41))
    parser = parse(text)
    it = parser.iterations[10]
    assert it.elapsed_ms == pytest.approx(106400.0) and it.tflops == pytest.approx(7.9)
    assert it.tokens_per_gpu == pytest.approx(134.5) and it.global_batch_size == 512
    metrics = parser.metrics()
    steady = range(5, 41)  # warm-up: steps <= int(0.1 * 40)
    assert metrics["training.elapsed_time_per_iteration"] == pytest.approx(
        sum(106400.0 + (s % 2) * 100 for s in steady) / len(steady))
    assert metrics["training.throughput_per_gpu"] == pytest.approx(
        len(steady) / sum(1 / (7.9 + (s % 2) / 100) for s in steady))
    assert metrics["training.tokens_per_gpu"] == pytest.approx(
        len(steady) / sum(1 / (134.5 + s % 2) for s in steady))
    assert (parser.dialect, parser.flavour) == ("megatron", "megatron-deepspeed")
    assert parser.errors == [] and parser.lines_skipped == 0


@pytest.mark.parametrize("prefix", ["0: [default0]:", "localhost: ", "10.1.2.3: ", "[default0]:", "[rank0]: "])
def test_arguments_dump_behind_launcher_prefixes_gives_sizes_and_tokens(prefix):
    text = megatron_dump(prefix) + "".join(deepspeed_line(s, 20, 106.46, prefix=prefix) for s in range(1, 21))
    parser = parse(text)
    assert parser.arguments == dict(DUMP_ROWS)
    assert (parser.seq_length, parser.world_size, parser.global_batch_size) == (2048, 384, 512)
    assert parser.planned == 20 and parser.completed
    assert parser.metrics()["training.tokens_per_gpu"] == pytest.approx(512 * 2048 / 106.46 / 384)
    assert parser.summary()["arguments"]["data_path"] == "['/data/oscar/meg-gpt2_text_document']"


def test_timer_lines_outside_the_dump_are_not_arguments():
    text = megatron_dump("") + "    load-checkpoint ................................: (12001.20, 12571.88)\n"
    assert "load-checkpoint" not in parse(text).arguments


def test_primus_logged_arguments_dump_is_read_with_colours_and_headers():
    head = "\x1b[32m[20261130 04:01:10]\x1b[0m[\x1b[36mrank-0/8\x1b[0m][DEBUG]    [---arguments.py:1576] :   "
    text = "".join(f"{head}{k} {'.' * (40 - len(k))} {v}\n" for k, v in
                   [("global_batch_size", "896"), ("seq_length", "8192"), ("world_size", "8"),
                    ("use_torch_fsdp2", "True")])
    parser = parse(text)
    assert parser.arguments == {"global_batch_size": "896", "seq_length": "8192", "world_size": "8",
                                "use_torch_fsdp2": "True"}
    assert parser.global_batch_size == 896 and parser.dialect == "primus"


def test_rocm_summary_nan_from_other_nodes_never_replaces_a_finite_value():
    summary = ("throughput per GPU: 429.4\nelapsed time per iteration: 17671.55\ntokens/GPU/s: 7416.7\n"
               "mem usages: 0.8731\n")
    nans = "".join(f"{host}: throughput per GPU: nan\n{host}: tokens/GPU/s: nan\n{host}: mem usages: nan\n"
                   for host in ("10.1.2.3", "10.1.2.4"))
    parser = parse("nan-first: throughput per GPU: nan\n" + summary + nans)
    assert parser.summary()["launcher_summary"] == {
        "throughput per gpu": 429.4, "elapsed time per iteration": 17671.55, "tokens/gpu/s": 7416.7,
        "mem usages": 0.8731}
    assert parser.metrics()["training.throughput_per_gpu"] == 429.4
    only_nan = parse("throughput per GPU: nan\n")
    assert only_nan.metrics()["training.throughput_per_gpu"] is None
    assert only_nan.summary()["launcher_summary"] == {"throughput per gpu": None}


def test_primus_single_and_paired_values_in_one_run():
    head = "[20260821 16:40:19][rank-7/8][DEBUG]    [---------------utils.py:425] : "
    warm = (f"{head}[2026-08-21 16:40:{{s:02d}}.000001] iteration {{s:8d}}/      20 | consumed samples: "
            "{c:12d} | elapsed time per iteration (ms): 16370.8 | throughput per GPU (TFLOP/s/GPU): 824.2 | "
            "learning rate: 9.2E-06 | global batch size:   256 | lm loss: 9.4E+00 | loss scale: 1.0 | "
            "grad norm: 2.118 | number of skipped iterations:   0 | number of nan iterations:   0 | "
            "hip mem usage/free/total/usage_ratio: 231.55GB/56.43GB/287.98GB/80.40%\n")
    paired = (f"{head}[2026-08-21 16:40:{{s:02d}}.000001] iteration {{s:8d}}/      20 | consumed samples: "
              "{c:12d} | elapsed time per iteration (ms): 16000.0/16100.0 | compute per GPU (TFLOP/s/GPU): "
              "800.0 (avg 810.0)  | tokens/s/GPU inst/harmonic mean: 16000.0/15900.0 | learning rate: 9.2E-06 | "
              "global batch size:   256 | lm loss: 9.4E+00 | loss scale: 1.0 | grad norm: 2.118 | number of "
              "skipped iterations:   0 | number of nan iterations:   0 | hip mem usage/free/total/usage_ratio: "
              "231.55GB/56.43GB/287.98GB/80.00%\n")
    text = "".join((warm if s <= 2 else paired).format(s=s, c=s * 256) for s in range(1, 21))
    parser = parse(text)
    assert parser.flavour == "primus-b3"
    assert parser.iterations[1].tflops == 824.2 and parser.iterations[1].tflops_avg is None
    assert (parser.iterations[3].tflops, parser.iterations[3].tflops_avg) == (800.0, 810.0)
    assert parser.metrics()["training.tokens_per_gpu"] == pytest.approx(16000.0)
    assert parser.metrics()["training.mem_usage"] == pytest.approx(0.80)
