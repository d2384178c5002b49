"""A GPU-less stand-in for a GPU cluster, real in every part but the GPUs.

* `testbed.trainer` — the simulated trainer (a test double of Megatron-LM/Primus), stdlib only.
* `testbed.image`   — the container image, built with debootstrap + `docker import` (no registry).
* `testbed.cluster` — N loopback nodes, each a real sshd and its own dockerd.
"""
from .cluster import NodeInfo, TestbedInfo, check_prerequisites, down, status, up
from .image import LATEST_TAG, ensure_image, image_name

__all__ = ["NodeInfo", "TestbedInfo", "check_prerequisites", "down", "status", "up",
           "LATEST_TAG", "ensure_image", "image_name"]
