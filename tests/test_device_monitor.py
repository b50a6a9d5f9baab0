"""The training loop's GPU monitor: per-iteration means of NVML's utilization and power
and the peak memory, from a sampling thread; nothing at all where JAX computes on a CPU."""

from __future__ import annotations

import time
import types

import pytest

from beastybar_jax.training import device_monitor
from beastybar_jax.training.device_monitor import DeviceMonitor


def fake_nvml(readings):
    """An NVML whose device returns ``readings`` (utilization %, memory bytes, milliwatts)
    in turn, the last one forever; a 400 W limit."""
    state = {"i": 0}

    def reading():
        i = min(state["i"], len(readings) - 1)
        return readings[i]

    def utilization(handle):
        state["i"] += 1  # one sample reads utilization first
        return types.SimpleNamespace(gpu=reading()[0])

    return types.SimpleNamespace(
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: 400_000,
        nvmlDeviceGetUtilizationRates=utilization,
        nvmlDeviceGetMemoryInfo=lambda handle: types.SimpleNamespace(used=reading()[1]),
        nvmlDeviceGetPowerUsage=lambda handle: reading()[2],
    )


def test_each_take_averages_the_samples_since_the_last():
    monitor = DeviceMonitor(fake_nvml([(0, 0, 0), (20, 1e9, 100_000), (80, 3e9, 300_000)]), handle=None, period=0.001)
    try:
        deadline = time.monotonic() + 5
        while len(monitor._samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        row = monitor.take()
        assert set(row) == set(device_monitor.METRICS)
        assert 20 <= row["gpu_utilization"] <= 80 and row["gpu_memory_gb"] == pytest.approx(3.0)
        assert row["gpu_power_share"] == pytest.approx(row["gpu_power_w"] / 400.0)
        later = monitor.take()  # only the last reading is left to sample
        assert later["gpu_utilization"] == pytest.approx(80) and later["gpu_power_w"] == pytest.approx(300.0)
    finally:
        monitor.close()


def test_no_monitor_where_jax_computes_on_a_cpu(monkeypatch):
    monkeypatch.setattr(device_monitor.jax, "default_backend", lambda: "cpu")
    assert DeviceMonitor.create() is None
