"""Pydantic models of the suite config file (the NEW schema, docs/product.md#config-files).

Every block forbids unknown keys so a typo is reported instead of silently ignored. Cross-field
rules that need the raw file (sweep, env, placeholders) live in `sweep.py` and `rules.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from cvs_tasks import runtimes
from cvs_tasks.config.container_defaults import DEFAULT_IDS
from cvs_tasks.config.errors import one_of
from cvs_tasks.config.sweep import precision_problem_of
from cvs_tasks.identifiers import ASCII_DECIMAL, is_ascii_positive_int

GPU_NAMES = ("MI300X", "MI325X", "MI355X")
RuntimeName = one_of(runtimes.names)  # a registered runtime (cvs_tasks.runtimes)


def _number_as_text(value: Any) -> Any:
    """Let `"micro_batch_size": 1` mean "1": sizes are strings in the schema but users type numbers."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value


NumText = Annotated[str, BeforeValidator(_number_as_text)]




def _plain_number(value: Any) -> Any:
    """`true` is not 1.0, and `"nan"`, `"inf"` or `"٤"` are not numbers: a gate value is a JSON
    number or a plain ASCII decimal in a string (`"2.5"`)."""
    if isinstance(value, bool) or (isinstance(value, str) and not ASCII_DECIMAL.match(value)):
        raise ValueError(f"must be a finite number, not {value!r}")
    return value


Number = Annotated[float, BeforeValidator(_plain_number)]
"""A finite JSON number (the models refuse NaN and infinities)."""


HOUR_S, DAY_S = 3600, 86400
# Upper bounds of the time fields: past them a value is a typo (1e308 overflows the clock arithmetic).
MAX_POLL_S, MAX_WAIT_S, MAX_RUN_S = HOUR_S, 7 * DAY_S, 30 * DAY_S
MAX_STEPS = 10**9


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Paths(Block):
    hf_token_file: str = Field(description="File holding the Hugging Face token (read on the head node).")
    log_dir: str = Field(description="Where training logs go on the nodes (and inside the container).")
    scripts_dir: str = Field(description="Where the harness writes launch scripts on the nodes.")
    data_cache_dir: str = Field(description="Tokenizer/data cache; shared storage for distributed runs.")
    rocm_dir: str = Field("", description="ROCm install in the container; empty means auto-detect.")


class Registry(Block):
    username: str = Field(description="Registry user name for docker login.")
    password_file: str = Field(description="File on each node holding the registry password (fed via stdin).")
    server: str = Field("", description="Registry host; empty means Docker Hub.")


class RuntimeArgs(Block):
    network: str = Field("host", description="docker --network; host networking is what RCCL and RDMA expect.")
    ipc: str = Field("host", description="docker --ipc; host IPC lets ranks share memory across processes.")
    privileged: bool = Field(True, description="docker --privileged; gives the container the GPU and RDMA devices.")
    volumes: list[str] = Field(default_factory=list, description='Bind mounts, "host:container[:ro]".')
    devices: list[str] = Field(
        default_factory=list, description="Devices passed in, e.g. /dev/kfd, /dev/dri, /dev/infiniband/rdma_cm."
    )
    cap_add: list[str] = Field(default_factory=list, description="Extra Linux capabilities (docker --cap-add).")
    security_opt: list[str] = Field(
        default_factory=list, description="docker --security-opt values, e.g. seccomp=unconfined."
    )
    group_add: list[str] = Field(default_factory=list, description="Extra groups for the container user, e.g. video.")
    ulimit: list[str] = Field(default_factory=list, description='e.g. "nofile=1048576:1048576".')
    shm_size: str | None = Field(None, description="docker --shm-size, e.g. 64G; unset keeps Docker's default.")
    registry: Registry | None = Field(None, description="Log in to a private registry before pulling the image.")
    omit_defaults: list[str] = Field(default_factory=list, description="Container defaults to leave out, by id "
                                     "(`config.show` lists them), e.g. \"devices:/dev/infiniband\".")

    @field_validator("omit_defaults")
    @classmethod
    def _known_defaults(cls, ids: list[str]) -> list[str]:
        unknown = [i for i in ids if i not in DEFAULT_IDS]
        if unknown:
            raise ValueError(f"unknown container default(s) {unknown}; known: {', '.join(DEFAULT_IDS)}")
        return ids

    @field_validator("volumes")
    @classmethod
    def _volume_shape(cls, volumes: list[str]) -> list[str]:
        bad = [v for v in volumes if len(v.split(":")) not in (2, 3) or not all(v.split(":")[:2])]
        if bad:
            raise ValueError(f'volumes must look like "host:container" or "host:container:ro"; got {bad}')
        return volumes


class Runtime(Block):
    name: RuntimeName = Field(description="; ".join(f"{k.name}: {k.summary}" for k in runtimes.ROWS) + ".")
    args: RuntimeArgs = Field(default_factory=RuntimeArgs, description="docker run options (docker runtime only).")


class Container(Block):
    lifetime: Literal["per_run", "persistent", "no_launch"] = Field(
        "per_run", description="per_run: launched and removed by each run; persistent: kept after the run; "
                               "no_launch: use a container that is already running.")
    name: str = Field("", description="Container name on every node (required for the docker runtime).")
    image: str = Field(description="Image to run; a name containing 'primus' selects the Primus backend.")
    image_tar: str | None = Field(None, description="docker-save tarball on the nodes, loaded if the image is absent.")
    runtime: Runtime = Field(description="How the job runs on each node.")
    env: dict[str, str] = Field(default_factory=dict, description="Container environment; values are strings.")


class Smoke(Block):
    enabled: bool = Field(True, description="Run a short smoke job before the sweep.")
    iters: int = Field(10, ge=1, description="Iterations of the smoke job.")
    micro_batch_size: NumText = Field("1", description="MBS of the smoke job.")
    global_batch_size: NumText = Field(
        "", description="Empty: MBS x data-parallel size of the cluster (8 on one 8-GPU node, 16 on two)."
    )
    precision: str = Field("BF16", description="Precision of the smoke job: FP8, BF16, FP16, MXFP8 or MXFP4.")

    @field_validator("micro_batch_size", "global_batch_size")
    @classmethod
    def _ascii_size(cls, value: str) -> str:
        if value.strip() and not is_ascii_positive_int(value):
            raise ValueError(f"must be a positive integer in ASCII digits 0-9 (got {value!r})")
        return value

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, value: str) -> str:
        problem = precision_problem_of(value)
        if problem:
            raise ValueError(problem)
        return value


class Checkpoint(Block):
    enforce: bool = Field(False, description="Run the Primus checkpoint save/resume test (Primus images only).")
    save_interval: int = Field(20, ge=1, le=MAX_STEPS, description="Save a checkpoint every this many steps.")
    save_iters: int = Field(21, ge=1, description="Steps of the save phase.")
    resume_iters: int = Field(25, ge=1, description="Steps the resume phase trains to.")
    loss_rtol: float = Field(0.05, ge=0, description="Largest relative loss jump accepted at the first resumed step.")
    checkpoint_dir: str = Field("", description="Shared checkpoint directory (distributed only).")


class LossCurve(Block):
    sample_every: int = Field(10, ge=1, le=MAX_STEPS,
                              description="Sample the loss every this many steps for the trend line.")
    milestone_steps: list[int] = Field(default_factory=lambda: [100, 500, 1000, 5000],
                                       description="Steps always sampled when the run reaches them.")
    max_slope: Number = Field(0.0, le=0, description="Largest accepted loss slope per step; <= 0 "
                              "(a positive value would pass a rising loss).")
    enforce: bool = Field(True, description="Fail the combo when the loss does not trend down; false records only.")


class Convergence(Block):
    target_metric: Literal["auto", "train_loss", "eval_loss"] = Field(
        "auto",
        description="Loss judged: auto is the eval (validation) loss when the run evaluates, else the training loss.",
    )
    target_value: Number = Field(0.0, ge=0, description="Loss to reach; 0 disables.")


class ScalingBaseline(Block):
    tokens_per_sec_total: float = Field(0.0, ge=0, description="Baseline total tok/s; 0 disables.")
    num_nodes: int = Field(1, ge=1, description="Node count of the baseline run.")


class Sweep(Block):
    combinations: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description='Key "MBS=<m>,GBS=<g>,PRECISION=<p>" -> train_params overlays for that combo.',
    )
    runs: list[str] | None = Field(None, description="Ordered combination keys to run; absent means all.")


class Watch(Block):
    poll_interval_s: float = Field(2.0, ge=0.01, le=MAX_POLL_S,
                                   description="Seconds between reads of the nodes' logs.")
    stall_timeout_s: float = Field(900.0, gt=0, le=MAX_WAIT_S,
                                   description="Fail when no log line arrives for this long.")
    startup_timeout_s: float = Field(1800.0, gt=0, le=MAX_WAIT_S,
                                     description="Fail when no iteration appears this long after launch.")
    timeout_s: float = Field(0.0, ge=0, le=MAX_RUN_S,
                             description="Whole-run limit; 0 derives it from the iteration count.")


class Gpu(Block):
    visible_check: str = Field("test -e /dev/kfd", description="Command that succeeds when GPUs are visible.")
    pids_command: str = Field("rocm-smi --showpids", description="Command listing processes holding GPUs.")


class History(Block):
    enabled: bool = Field(True, description="Record every finished run in the history database.")
    path: str = Field("", description="History database; empty: <reports dir>/history.sqlite ($CVS_HISTORY_DB wins).")


class Diagnose(Block):
    auto: bool = Field(False, description="After a distributed combo fails or misses a throughput/scaling gate, "
                                          "run the smoke cell on every node on its own to find the bad node.")
    tolerance_pct: float = Field(
        10.0, gt=0, description="A node slower than the median by more than this is an outlier."
    )


class SuiteConfig(Block):
    """The suite config file; `_`-prefixed top-level keys are comments and are dropped before this."""

    gpu_name: str = Field(description="MI300X, MI325X or MI355X.")
    gpus_per_node: int = Field(8, ge=1, description="GPUs each node trains on.")
    enforce_thresholds: bool = Field(
        True, description="Gate metrics on the threshold file; false records every metric only."
    )
    threshold_json: str = Field("", description="Threshold file; relative to this file, then the repo's thresholds/.")
    verify_network_errors: bool = Field(
        False, description="Fail a combo whose RDMA error counters grew during training."
    )
    paths: Paths = Field(description="Files and folders on the head node and the nodes.")
    container: Container = Field(description="The container every job runs in.")
    train_params: dict[str, Any] = Field(description="Free-form training parameters; model_name is required.")
    smoke: Smoke = Field(
        default_factory=Smoke, description="A short job before the sweep that proves the set-up works."
    )
    checkpoint: Checkpoint = Field(default_factory=Checkpoint, description="Primus checkpoint save and resume test.")
    loss_curve: LossCurve = Field(
        default_factory=LossCurve, description="Loss trend gate: a least-squares slope over sampled steps."
    )
    convergence: Convergence = Field(default_factory=Convergence, description="Final loss judged against a target.")
    scaling_baseline: ScalingBaseline = Field(default_factory=ScalingBaseline,
                                              description="Reference throughput for multi-node scaling efficiency.")
    sweep: Sweep = Field(default_factory=Sweep, description="The combos to train, each a sweep cell.")
    watch: Watch = Field(default_factory=Watch, description="How the training logs are watched.")
    gpu: Gpu = Field(default_factory=Gpu, description="Commands that check the GPUs on a node.")
    history: History = Field(default_factory=History, description="The run history database.")
    diagnose: Diagnose = Field(
        default_factory=Diagnose, description="Finding the bad node of a failed distributed run."
    )

    @field_validator("gpu_name", mode="before")
    @classmethod
    def _known_gpu(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        name = value.strip().upper()
        if name not in GPU_NAMES:
            raise ValueError(f"must be one of {', '.join(GPU_NAMES)} (got {value!r})")
        return name


TOP_LEVEL_KEYS = tuple(SuiteConfig.model_fields)


def config_schema() -> dict[str, Any]:
    """JSON Schema of the suite config, for editors (`"$schema"` completion and checks)."""
    schema = SuiteConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cvs-tasks suite config"
    schema["patternProperties"] = {"^_": {"description": "comment; ignored"}}
    return schema
