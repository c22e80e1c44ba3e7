#!/usr/bin/env python3
"""A Ray cluster of a head and WORKERS worker nodes on this machine, for tests/ray.rs.

Usage: ray_cluster.py TEMP_DIR PORT WORKERS
Prints `address HOST:PORT` once every node is up, then reads commands on stdin:
  kill I   kills worker node I (from 1) at once, as a machine that dies
  (end of input, or `quit`)   stops every node and exits.
Every process of these nodes runs under TEMP_DIR (the test's own), so the test can
also find and end any left behind by that path, and no other Ray is touched.
"""

import sys

import ray
from ray.cluster_utils import Cluster


def main():
    # The cluster's address is for this test alone: not written to /tmp/ray, where
    # `ray.init()` of anyone else on the machine would find it.
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    temp_dir, port, workers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    common = dict(
        temp_dir=temp_dir,
        include_dashboard=False,
        object_store_memory=80 * 1024 * 1024,
    )
    cluster = Cluster(
        initialize_head=True,
        head_node_args=dict(
            common,
            gcs_server_port=port,
            # The head coordinates and stands for the server's node; the workers send
            # load.
            num_cpus=0,
            resources={"server": 1},
            # A dead node is noticed within seconds (Ray's default is about 30 s).
            _system_config={
                "health_check_initial_delay_ms": 1000,
                "health_check_period_ms": 1000,
                "health_check_failure_threshold": 3,
            },
        ),
    )
    nodes = [cluster.add_node(num_cpus=1, **common) for _ in range(workers)]
    cluster.wait_for_nodes()
    print(f"address {cluster.address}", flush=True)
    try:
        for line in sys.stdin:
            cmd = line.split()
            if cmd[:1] == ["kill"]:
                cluster.remove_node(nodes[int(cmd[1]) - 1], allow_graceful=False)
                print(f"killed {cmd[1]}", flush=True)
            elif cmd[:1] == ["quit"]:
                break
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
