"""Where servers fit: the GPUs of each node of the Ray cluster, checked against the plan's
server groups, and how many GPUs a server's placement bundle reserves. Pure; no Ray (the node
list comes from grid/execute/cluster.py)."""

from __future__ import annotations

from collections.abc import Sequence

from grid.plan.cells import ServerGroup
from grid.plan.config import ConfigError


def _launched(group: ServerGroup) -> bool:
    return bool(group.config["engine"]["name"] != "external")


def check_nodes(groups: Sequence[ServerGroup], node_gpus: Sequence[int]) -> None:
    """ConfigError (one line) if a launched server needs more GPUs than any one node has: a
    server never spans nodes (STRICT_PACK), so such a sweep could never run."""
    largest = max(node_gpus, default=0)
    for group in groups:
        if _launched(group) and group.tp_size > largest:
            raise ConfigError(
                f"variant {group.variant} needs {group.tp_size} GPUs on one node but the "
                f"largest node of the Ray cluster has {largest} "
                f"(nodes: {', '.join(str(n) for n in sorted(node_gpus, reverse=True)) or 'none'})")


def bundle_gpus(tp_size: int, node_gpus: Sequence[int], exclusive_node: bool) -> int:
    """GPUs a server's placement bundle reserves. Packed: its tp_size. Exclusive: all GPUs of
    the smallest node it fits on, so no other server is placed beside it (on a cluster of equal
    nodes, exactly one node; the server itself still gets tp_size of them from Ray)."""
    if not exclusive_node:
        return tp_size
    fitting = [n for n in node_gpus if n >= tp_size]
    return min(fitting) if fitting else tp_size
