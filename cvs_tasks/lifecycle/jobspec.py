"""Turn the session's config and one combo (or the smoke / checkpoint cell) into a JobSpec."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cvs_tasks.config.layout import combo_layout, smoke_global_batch
from cvs_tasks.jobs.spec import JobSpec
from cvs_tasks.run.stages import DOWNLOAD_TOKENIZER, LAUNCH_CONTAINER

if TYPE_CHECKING:
    from cvs_tasks.config import Combo
    from cvs_tasks.lifecycle.session import Session


def job_spec(
    session: Session,
    *,
    label: str,
    combo: Combo,
    mbs: str | None = None,
    gbs: str | None = None,
    precision: str | None = None,
    iterations: int | None = None,
    save_dir: str | None = None,
    save_interval: int | None = None,
    load_dir: str | None = None,
) -> JobSpec:
    if session.scheduler.assigns_nodes:
        session.hosts()  # binds the plan to the nodes handed out (NNODES, MASTER_ADDR) first
    cfg = session.config
    plan = session.plan
    params = dict(combo.train_params)
    mbs = mbs or combo.mbs
    gbs = gbs or combo.gbs
    precision = precision or combo.precision
    params.update({"micro_batch_size": mbs, "global_batch_size": gbs, "precision": precision})
    if iterations is None:
        iterations = int(str(params.get("training_iterations", "10")))
    params["training_iterations"] = str(iterations)
    tokenizer_rec = session.run.read_record(DOWNLOAD_TOKENIZER.id)
    tokenizer_path = (tokenizer_rec.data.get("tokenizer_path") if tokenizer_rec and tokenizer_rec.status == "PASS"
                      else None)
    return JobSpec(
        backend=plan.backend,
        label=label,
        gpu_name=cfg.gpu_name,
        image=cfg.container.image,
        runtime=cfg.container.runtime.name,
        nnodes=plan.nnodes,
        distributed=plan.distributed,
        mbs=str(mbs),
        gbs=str(gbs),
        precision=str(precision),
        iterations=int(iterations),
        train_params=params,
        log_dir=session.node_log_dir,
        scripts_dir=cfg.paths.scripts_dir,
        data_cache_dir=cfg.paths.data_cache_dir,
        rocm_dir=cfg.paths.rocm_dir or "",
        env=dict(plan.env),
        hf_token_path=token_path(session) if has_token(session) else None,
        tokenizer_path=tokenizer_path,
        save_dir=save_dir,
        save_interval=save_interval,
        load_dir=load_dir,
        run_id=session.run.run_id,
    )


def smoke_cell(session: Session) -> tuple[str, str, str, int]:
    """MBS, GBS, precision and iterations of the smoke block; an empty GBS is MBS x DP of the cluster."""
    smoke = session.config.smoke
    mbs = smoke.micro_batch_size or "1"
    plan = session.plan
    layout = combo_layout(plan.combos[0], plan.nnodes, session.config.gpus_per_node)
    return (
        mbs,
        smoke.global_batch_size or smoke_global_batch(mbs, layout),
        smoke.precision or "BF16",
        int(smoke.iters),
    )


TOKEN_NAME = "hf_token"  # in the node's run folder, mode 0600


def token_path(session: Session) -> str:
    return f"{session.node_run_dir}/{TOKEN_NAME}"


def has_token(session: Session) -> bool:
    """Did the launch place the HF token file on the nodes (its record says so)?"""
    rec = session.run.read_record(LAUNCH_CONTAINER.id)
    return rec is not None and rec.data.get("hf_token") is True
