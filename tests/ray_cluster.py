"""A real Ray cluster on 127.0.0.1 for the tests: a head node and one more
node, as processes of this machine, with this process as the driver."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def local_cluster(folder: Path, head_cpus: int, node_cpus: int) -> Iterator[Any]:
    """A ``ray.cluster_utils.Cluster`` of a head node with ``head_cpus`` CPUs
    and a node with ``node_cpus``, connected; the driver runs in ``folder``
    meanwhile, since Ray's workers put the driver's folder on their import
    path: started from the source tree they would import it instead of the
    installed package."""
    import ray
    from ray.cluster_utils import Cluster

    here = os.getcwd()
    os.chdir(folder)
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": head_cpus, "include_dashboard": False})
    try:
        nodes.add_node(num_cpus=node_cpus)
        nodes.wait_for_nodes()
        ray.init(address=nodes.address, log_to_driver=False)
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()
        os.chdir(here)
