"""Several processes (hosts) as one run, with JAX's multi-controller runtime.

Every process runs the same command with the same config. :func:`initialize` joins
them through a coordinator (process 0 hosts it at ``host:port``) with
``jax.distributed.initialize``; after that ``jax.devices()`` lists every process's
devices, the training mesh spans them all and each jitted iteration runs as one SPMD
program. Only process 0 writes logs, metrics and the run lock; orbax checkpoints are
written and restored by all processes together (each writes its own shards).

Where the processes learn who they are, first match wins:

1. arguments (``experiments/train.py --coordinator HOST:PORT --num-processes N
   --process-id I``);
2. environment variables ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
   ``JAX_PROCESS_ID`` (the first is JAX's own; we read the other two for it);
3. a cluster JAX detects by itself (SLURM, Open MPI, Kubernetes, Cloud TPU).

It must run before anything touches a JAX device: importing a game creates constant
arrays, so the CLI initializes right after reading the YAML and before validating it.
On the CPU backend the processes talk through gloo.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time

import jax
import numpy as np

ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
DEFAULT_TIMEOUT_SECONDS = 300


class DistributedError(RuntimeError):
    """The processes could not be joined into one run; the message says what to fix."""


def _env_int(name: str) -> int | None:
    text = os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise DistributedError(f"environment variable {name}={text!r} must be an integer") from None


def _host_and_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"coordinator address {address!r} must be HOST:PORT, e.g. 10.0.0.1:1234")
    return host.strip("[]"), int(port)


def _check_port_free(address: str) -> None:
    """Process 0 serves the coordinator on the address's port: a port in use is a
    segmentation fault inside JAX, so it is refused here, with the reason."""
    _, port = _host_and_port(address)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: a closed run's port is free
        try:
            probe.bind(("", port))
        except OSError as e:
            raise DistributedError(f"process 0 cannot serve the coordinator on port {port} ({e.strerror or e}); "
                                   f"choose a free port for --coordinator") from None


def _wait_for_coordinator(address: str, timeout: float) -> None:
    """Process > 0: poll the coordinator's port until it answers or ``timeout`` passes.
    (JAX aborts the process when it cannot register in time; this says why, cleanly.)"""
    host, port = _host_and_port(address)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, timeout)):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"could not reach the coordinator at {address} within {timeout:.0f} s ({e}); start process 0 "
                    f"with the same coordinator address, and check the host, the port and the firewall") from None
            time.sleep(0.5)


def initialize(coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None,
               timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS) -> None:
    """Join this process to the run (a no-op when already joined). See the module docstring.

    Raises :class:`DistributedError` with a one-line reason for incomplete settings, an
    unreachable coordinator (after ``timeout_seconds``) or a JAX backend already in use.
    """
    if jax.distributed.is_initialized():
        return
    coordinator = coordinator or os.environ.get(ENV_COORDINATOR) or None
    num_processes = num_processes if num_processes is not None else _env_int(ENV_NUM_PROCESSES)
    process_id = process_id if process_id is not None else _env_int(ENV_PROCESS_ID)
    given = {"coordinator address": coordinator, "number of processes": num_processes, "process id": process_id}
    if any(v is not None for v in given.values()) and any(v is None for v in given.values()):
        missing = ", ".join(k for k, v in given.items() if v is None)
        raise DistributedError(
            f"incomplete distributed settings: the {missing} is missing; give all three "
            f"(--coordinator/--num-processes/--process-id or {ENV_COORDINATOR}/{ENV_NUM_PROCESSES}/{ENV_PROCESS_ID})")
    if num_processes is not None and not 0 <= process_id < num_processes:
        raise DistributedError(f"process id {process_id} must be in 0..{num_processes - 1} for {num_processes} processes")
    if process_id:
        _wait_for_coordinator(coordinator, timeout_seconds)
    elif coordinator is not None:
        _check_port_free(coordinator)
        print(f"process 0 of {num_processes}: coordinator at {coordinator}; waiting up to {timeout_seconds} s "
              f"for the other processes to join", file=sys.stderr, flush=True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU backend: cross-process collectives
    try:
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                                   process_id=process_id, initialization_timeout=int(timeout_seconds))
    except (RuntimeError, ValueError) as e:
        if "before any JAX" in str(e):
            raise DistributedError(
                "JAX is already using its devices, so this process can no longer join a multi-process run: call "
                "beastybar_jax.training.distributed.initialize() first thing (experiments/train.py does)") from None
        raise DistributedError(
            f"could not start the multi-process runtime: {e}. Without a cluster that JAX detects (SLURM, Open MPI, "
            f"...), give {ENV_COORDINATOR}, {ENV_NUM_PROCESSES} and {ENV_PROCESS_ID}") from None
    if num_processes is not None and jax.process_count() != num_processes:  # the coordinator's count holds
        raise DistributedError(f"this process was started for {num_processes} processes, the run has "
                               f"{jax.process_count()}: give every process the same --num-processes")
    if jax.process_count() > 1 and jax.default_backend() == "cpu":
        # CPU processes share one persistent-cache key for a program, but an executable
        # compiled by one process deadlocks in another's gloo collectives: compile each.
        jax.config.update("jax_enable_compilation_cache", False)


def is_main_process() -> bool:
    """Process 0 writes logs, metrics and locks; every process takes part in checkpoints."""
    return jax.process_index() == 0


def barrier(name: str, timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS) -> None:
    """Wait until every process gets here (a no-op with one process).

    Call it before the first run of a newly compiled function: on the CPU backend each
    new cross-process collective opens its gloo connections at its first run and gives
    up after 30 s, and processes finish compiling at different times."""
    if jax.process_count() == 1:
        return
    from orbax.checkpoint import multihost

    multihost.sync_global_processes(f"beastybar_jax:{name}", timeout=int(timeout_seconds))


def _allgather_bytes(data: bytes) -> list[bytes]:
    """Each process's ``data``, in process order (a collective: every process must call it)."""
    from jax.experimental import multihost_utils

    lengths = multihost_utils.process_allgather(np.asarray([len(data)], np.int32)).reshape(-1)
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[:len(data)] = np.frombuffer(data, np.uint8)
    gathered = multihost_utils.process_allgather(padded).reshape(len(lengths), -1)
    return [bytes(row[:n]) for row, n in zip(gathered, lengths)]


def check_same_config(config, options: dict | None = None) -> None:
    """Raise ``ConfigError`` on every process when the processes' configs, or their
    command-line ``options`` (``{"--resume": True, ...}``), differ (a collective; a no-op
    with one process), naming what differs. A process resuming beside one starting
    afresh would wait for it forever."""
    if jax.process_count() == 1:
        return
    from beastybar_jax.config import ConfigError, TrainConfig, config_diff

    # Before any collective: one over processes with different device counts fails in JAX.
    per_process = [sum(d.process_index == p for d in jax.devices()) for p in range(jax.process_count())]
    if len(set(per_process)) > 1:
        raise ConfigError(f"the {len(per_process)} processes have different numbers of devices ("
                          + ", ".join(f"process {p}: {n}" for p, n in enumerate(per_process))
                          + "); give each the same (CUDA_VISIBLE_DEVICES, or XLA_FLAGS on the CPU)")
    text = json.dumps(dict(config=config.to_dict(), options=options or {}), sort_keys=True).encode()
    everyone = [json.loads(t) for t in _allgather_bytes(text)]
    if all(e == everyone[0] for e in everyone[1:]):
        return
    options_differ = sorted({k for e in everyone[1:] for k in set(e["options"]) | set(everyone[0]["options"])
                             if e["options"].get(k) != everyone[0]["options"].get(k)})
    if options_differ:
        raise ConfigError(f"the {len(everyone)} processes were started with different options ({', '.join(options_differ)}"
                          f"); start every process with the same command line but --process-id")
    differing = set()
    for other in everyone[1:]:
        diff = config_diff(TrainConfig.from_dict(everyone[0]["config"]), TrainConfig.from_dict(other["config"]))
        differing.update(diff)
    raise ConfigError(
        f"the {len(everyone)} processes were started with different configs (they differ in: "
        f"{', '.join(sorted(differing))}); start every process with the same config file and --set overrides")
