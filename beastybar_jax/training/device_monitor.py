"""What the GPU did during each training iteration: utilization, memory and power, read
through NVML (``nvidia-ml-py``, the ``cuda`` extra; absent on a CPU, where nothing is
logged).

NVML's utilization is the share of a recent sample period in which some kernel ran, so
one read per iteration would describe its last fraction of a second. A daemon thread
reads every ``period`` seconds and :meth:`DeviceMonitor.take` returns the mean
utilization and power since the previous call and the peak memory: one row per
iteration, logged with the iteration's metrics (``metrics.jsonl``, TensorBoard, the
console).
"""

from __future__ import annotations

import threading
from typing import Optional

import jax

METRICS = ("gpu_utilization", "gpu_memory_gb", "gpu_power_w", "gpu_power_share")
"""The metrics :meth:`DeviceMonitor.take` returns: mean utilization in percent, peak
memory used in GB, mean power in watts and as a share of the power limit (0..1)."""


class DeviceMonitor:
    """Samples the first visible GPU (``jax.devices()[0]``'s NVML device) in a daemon thread."""

    def __init__(self, nvml, handle, period: float = 0.1):
        self._nvml, self._handle, self._period = nvml, handle, period
        self._limit_w = nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0
        self._lock = threading.Lock()
        self._samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="device-monitor", daemon=True)
        self._thread.start()

    @classmethod
    def create(cls, period: float = 0.1) -> Optional["DeviceMonitor"]:
        """A monitor of the GPU JAX computes on, or None: JAX's backend is not a GPU,
        ``nvidia-ml-py`` is not installed, or NVML cannot start."""
        if jax.default_backend() != "gpu":
            return None
        try:
            import pynvml as nvml
        except ImportError:
            return None
        try:
            nvml.nvmlInit()
            device = jax.devices()[0]
            handle = nvml.nvmlDeviceGetHandleByIndex(getattr(device, "local_hardware_id", None) or 0)
            return cls(nvml, handle, period)
        except Exception:  # NVML's own errors (no driver access in a container, say)
            return None

    def _read(self) -> tuple[float, float, float]:
        nvml, handle = self._nvml, self._handle
        utilization = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
        memory_gb = nvml.nvmlDeviceGetMemoryInfo(handle).used / 1e9
        power_w = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
        return float(utilization), float(memory_gb), float(power_w)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            try:
                sample = self._read()
            except Exception:  # a failed read skips one sample, not the training
                continue
            with self._lock:
                self._samples.append(sample)

    def take(self) -> dict:
        """:data:`METRICS` over the samples since the previous call (one read now if
        there were none)."""
        with self._lock:
            samples, self._samples = self._samples, []
        if not samples:
            samples = [self._read()]
        utilization = sum(s[0] for s in samples) / len(samples)
        power = sum(s[2] for s in samples) / len(samples)
        return dict(gpu_utilization=utilization, gpu_memory_gb=max(s[1] for s in samples), gpu_power_w=power,
                    gpu_power_share=power / self._limit_w if self._limit_w > 0 else float("nan"))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
