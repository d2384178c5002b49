"""Config, threshold and cluster files: pydantic models and the load pipeline.

Everything a user writes is checked here, and every problem is reported at once as a
`ConfigError` naming the file and the dotted path of each problem.
"""

from cvs_tasks.config.cluster import Cluster, HostSpec, load_cluster, parse_cluster
from cvs_tasks.config.describe import (
    describe_suite,
    distributed_warnings,
    effective_config,
    guess_suite_kind,
    local_file_warnings,
    redact,
    shown_config,
)
from cvs_tasks.config.errors import ConfigError, Problem
from cvs_tasks.config.load import Suite, load_suite, merge_under
from cvs_tasks.config.models import GPU_NAMES, SuiteConfig, config_schema
from cvs_tasks.config.placeholders import CHANGEME, find_changeme, local_user
from cvs_tasks.config.sweep import DEFAULT_COMBO, TRAIN_PARAM_DEFAULTS, Combo, combo_key, parse_combo_key
from cvs_tasks.config.templates import FORMATS as TEMPLATE_FORMATS
from cvs_tasks.config.templates import Template, copy_template, find_template, list_templates, template_toml
from cvs_tasks.config.thresholds import KNOWN_METRICS, REPO_ROOT, ThresholdSpec, load_threshold_file

__all__ = [
    "CHANGEME", "DEFAULT_COMBO", "GPU_NAMES", "KNOWN_METRICS", "REPO_ROOT", "TRAIN_PARAM_DEFAULTS",
    "TEMPLATE_FORMATS", "Cluster", "Combo", "ConfigError", "HostSpec", "Problem", "Suite", "SuiteConfig", "Template",
    "ThresholdSpec", "combo_key", "config_schema", "copy_template", "describe_suite",
    "distributed_warnings", "effective_config", "find_changeme", "find_template", "guess_suite_kind",
    "load_cluster", "load_suite", "load_threshold_file", "local_file_warnings", "local_user",
    "merge_under", "parse_cluster", "parse_combo_key", "list_templates", "redact", "shown_config",
    "template_toml",
]
