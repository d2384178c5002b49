"""`config` namespace: list and copy templates, validate a config (with its cluster), show, schema."""

from __future__ import annotations

import json

from invoke import Collection

from cvs_tasks.tasks._common import task, user_errors


@task(name="list", help={"filter": "Only templates whose file name contains this text (e.g. 8b, mi355x, threshold)."})
def list_(c, filter=""):
    """List the packaged config, threshold and cluster templates."""
    from cvs_tasks import config as cfg

    with user_errors():
        templates = cfg.list_templates(filter)
        if not templates:
            print(f"no packaged template matches {filter!r}")
        for template in templates:
            extra = f"  (thresholds: {', '.join(template.thresholds)})" if template.thresholds else ""
            print(f"{template.kind:9}  {template.name}  [{'|'.join(cfg.TEMPLATE_FORMATS)}]{extra}")


@task(
    positional=["name"],
    help={
        "name": "Template file name, e.g. mi3xx_megatron_llama-3.1-8b_single.json (see config.list).",
        "output": "Where to write it: a file path, or an existing folder.",
        "with_thresholds": "Also copy the template's threshold file(s) next to it.",
        "force": "Replace files that already exist.",
        "format": "json or toml (annotated: a comment explains each field); default: the output's suffix, else json.",
    },
)
def copy(c, name, output, with_thresholds=False, force=False, format=None):
    """Copy a packaged template to edit: then replace every <changeme> and run config.validate."""
    from cvs_tasks import config as cfg

    with user_errors():
        for path in cfg.copy_template(name, output, with_thresholds=with_thresholds, overwrite=force, fmt=format):
            print(f"wrote {path}")


@task(
    help={
        "config": "Suite config (JSON or TOML) to check.",
        "cluster": (
            "Cluster file (JSON or TOML, hosts); enables the host-count and batch-layout checks (a *_single config "
            "is checked on one node without it), {user-id} from its username, and asks node 0's image and the nodes "
            "what the launcher needs (MXFP, RDMA links)."
        ),
    }
)
def validate(c, config, cluster=None):
    """Load a config (and cluster) as a run would; print what would run, or every problem (exit 2)."""
    from cvs_tasks import config as cfg
    from cvs_tasks.config.readiness import check_ready
    from cvs_tasks.plan import check_launch_layout, check_runtime_settings, make_plan, ready_or_refused, suite_from_name

    warnings: list[str] = []
    with user_errors():
        loaded_cluster = cfg.load_cluster(cluster) if cluster else None
        suite = cfg.load_suite(config, loaded_cluster)
        if loaded_cluster is not None:  # the same suite/host-count, layout, readiness and launcher refusals as a run
            hosts, warnings = ready_or_refused(make_plan(suite, loaded_cluster))
            if hosts is not None:
                hosts.close()
        else:
            kind = suite_from_name(suite.config_path.name)
            if kind:  # without a cluster file: one node, or the contract only
                check_launch_layout(suite, 1 if kind == "single" else None, distributed=kind != "single")
            check_ready(suite, None, kind == "distributed")
        check_runtime_settings(suite)
        summary = cfg.describe_suite(suite, loaded_cluster)
        summary["warnings"] = [*summary["warnings"], *warnings]
        print(format_summary(summary))


@task(
    help={
        "config": "Suite config JSON.",
        "cluster": "Cluster JSON; its container defaults and username are applied as in a run.",
    }
)
def show(c, config, cluster=None):
    """Print the effective config as JSON (placeholders resolved, defaults filled, secrets redacted),
    with each container default, its reason and whether it is added, in the config or omitted."""
    from cvs_tasks import config as cfg

    with user_errors():
        loaded_cluster = cfg.load_cluster(cluster) if cluster else None
        print(json.dumps(cfg.shown_config(cfg.load_suite(config, loaded_cluster)), indent=2))


@task
def schema(c):
    """Print the JSON Schema of the suite config (point an editor's "$schema" at a saved copy)."""
    from cvs_tasks import config as cfg

    with user_errors():
        print(json.dumps(cfg.config_schema(), indent=2))


def format_summary(summary: dict) -> str:
    """The validate report: one header block, one block per combo, then warnings."""
    lines = [
        f"config     {summary['config_file']}",
        f"thresholds {summary['threshold_file'] or '(none: record-only)'}",
        f"suite      {summary['suite']} ({summary['backend']}, {summary['gpu_name']} x {summary['gpus_per_node']})",
        f"image      {summary['image']}",
        f"model      {summary['model_name']}",
        f"gating     {'enforced' if summary['enforce_thresholds'] else 'record-only'}",
    ]
    if summary["hosts"]:
        hosts = ", ".join(h["name"] + (" (local)" if h["local"] else "") for h in summary["hosts"])
        lines.append(f"hosts      {len(summary['hosts'])}: {hosts}")
    lines.append(f"combos     {len(summary['combos'])}")
    for combo in summary["combos"]:
        gate = "" if combo["has_thresholds"] else "  [no threshold cell: recorded only]"
        lines.append(f"  {combo['id']}{gate}")
        params = combo["train_params"]
        lines.append("    " + ", ".join(f"{k}={params[k]}" for k in sorted(params)))
    for warning in summary["warnings"]:
        lines.append(f"warning: {warning}")
    lines.append("OK: the config is valid")
    return "\n".join(lines)


ns = Collection("config")
ns.add_task(list_, name="list")
ns.add_task(copy)
ns.add_task(validate)
ns.add_task(show)
ns.add_task(schema)
