"""Where servers fit: the GPUs of each node of the Ray cluster, checked against the plan's
server groups, and how many GPUs a server's placement bundle reserves. Pure; no Ray (the node
list comes from grid/execute/cluster.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import engines
from grid.plan.cells import ServerGroup
from grid.plan.config import ConfigError


def server_gpus(group: ServerGroup) -> int:
    """GPUs one server of the group takes (its engine says: its tp_size on GPUs, none on the
    CPU or for a server someone else runs)."""
    engine = group.config["engine"]
    return engines.get(engine["name"]).gpus(group.tp_size, engine.get("device") or "cuda")


def check_nodes(groups: Sequence[ServerGroup], node_gpus: Sequence[int]) -> None:
    """ConfigError (one line) if a launched server needs more GPUs than any one node has: a
    server never spans nodes (STRICT_PACK), so such a sweep could never run."""
    largest = max(node_gpus, default=0)
    for group in groups:
        if server_gpus(group) > largest:
            raise ConfigError(
                f"variant {group.variant} needs {server_gpus(group)} GPUs on one node but the "
                f"largest node of the Ray cluster has {largest} "
                f"(nodes: {', '.join(str(n) for n in sorted(node_gpus, reverse=True)) or 'none'})")


def bundle_gpus(tp_size: int, node_gpus: Sequence[int], exclusive_node: bool) -> int:
    """GPUs a server's placement bundle reserves, for a server of `tp_size` GPUs (server_gpus).
    Packed: its tp_size. Exclusive: all GPUs of the smallest node it fits on, so no other
    server is placed beside it (on a cluster of equal nodes, exactly one node; the server
    itself still gets tp_size of them from Ray). A server without GPUs reserves none."""
    if not exclusive_node or tp_size == 0:
        return tp_size
    fitting = [n for n in node_gpus if n >= tp_size]
    return min(fitting) if fitting else tp_size


def group_cpus(group: ServerGroup, server_cpu: float) -> float:
    """CPUs one placement group of `group` asks for on one node: each load generator's
    load.client_cpus, plus the server actor's `server_cpu` when a server is launched."""
    load = group.config["load"]
    need = int(load["clients"]) * float(load["client_cpus"])
    return need + (server_cpu if engines.get(group.config["engine"]["name"]).launches else 0.0)


def check_node_resources(groups: Sequence[ServerGroup], nodes: Sequence[tuple[int, float]],
                         server_cpu: float) -> None:
    """ConfigError (one line) if no single node of the cluster has both the GPUs and the CPUs
    one of the groups asks for (STRICT_PACK puts a server and its load generators on one
    node): such a group could never be placed, and waiting for it would never end. `nodes`:
    (GPUs, CPUs) of each alive node."""
    for group in groups:
        gpus, cpus = server_gpus(group), group_cpus(group, server_cpu)
        if not any(g >= gpus and c >= cpus for g, c in nodes):
            shown = ", ".join(f"{g} GPUs + {c:g} CPUs" for g, c in nodes) or "none"
            raise ConfigError(
                f"variant {group.variant} needs {gpus} GPU(s) and {cpus:g} CPUs on one node "
                f"(load.clients={group.config['load']['clients']} x load.client_cpus="
                f"{group.config['load']['client_cpus']:g} + the server's {server_cpu:g}), but "
                f"no node of the Ray cluster has both (nodes: {shown}); lower load.clients or "
                "load.client_cpus")


def fits_together(groups: Sequence[Sequence[Mapping[str, float]]],
                  nodes: Sequence[tuple[int, float]]) -> bool:
    """Whether every group's placement bundles can be reserved at the same time, each group
    on one node (STRICT_PACK), on nodes of (GPUs, CPUs): first fit, the largest group first.
    A heuristic: it may say no where a cleverer packing fits, which costs a server start,
    never a reservation that waits for resources a kept server holds."""
    free = [[float(g), float(c)] for g, c in nodes]
    needs = sorted(((sum(b.get("GPU", 0.0) for b in bundles),
                     sum(b.get("CPU", 0.0) for b in bundles)) for bundles in groups),
                   reverse=True)
    for gpus, cpus in needs:
        node = next((n for n in free if n[0] >= gpus and n[1] >= cpus), None)
        if node is None:
            return False
        node[0] -= gpus
        node[1] -= cpus
    return True
