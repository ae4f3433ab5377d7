"""A tf.distribute cluster of worker processes on localhost, for the MultiWorkerMirroredStrategy
tests (training and sensitivity): each worker gets TF_CONFIG with the cluster and its index."""

from __future__ import annotations

import json
import socket
import subprocess


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run_workers(argv_of, n: int, timeout: float, env: dict) -> list[tuple[int, str]]:
    """Starts `n` workers (`argv_of(i)`: the command line of worker i) with TF_CONFIG naming a
    cluster of `n` workers on free localhost ports, waits for all of them (killing any left after
    `timeout` seconds) and returns (exit status, stderr) of each."""
    cluster = {"worker": [f"localhost:{p}" for p in free_ports(n)]}
    procs = []
    try:
        for i in range(n):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
            procs.append(
                subprocess.Popen(
                    argv_of(i),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={**env, "TF_CONFIG": tf_config},
                )
            )
        errors = [p.communicate(timeout=timeout)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [(p.returncode, err) for p, err in zip(procs, errors, strict=True)]


def strategy(kind: str):
    """The tf.distribute strategy of a worker process: "mirrored", MirroredStrategy over two
    logical CPU devices of this process (configured here, so before TensorFlow initialises its
    devices); "multiworker", MultiWorkerMirroredStrategy with the cluster of TF_CONFIG; "single",
    the default strategy."""
    import tensorflow as tf

    if kind == "mirrored":
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2
        )
        return tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    if kind == "multiworker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if kind == "single":
        return tf.distribute.get_strategy()
    raise ValueError(f"strategy kind must be mirrored, multiworker or single, got {kind!r}")
