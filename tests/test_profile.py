"""``benchmark.py profile`` reads a device's busy time from a profiler trace: the union of
the kernels' intervals on the device's streams, not the host's events, nor the
"XLA Ops" line that restates the kernels."""

from __future__ import annotations

import gzip
import json

from bench.profile import device_timeline


def write_trace(directory, events):
    path = directory / "plugins" / "profile" / "run" / "perfetto_trace.json.gz"
    path.parent.mkdir(parents=True)
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def metadata(kind, pid, name, tid=None):
    event = {"ph": "M", "pid": pid, "name": kind, "args": {"name": name}}
    return event if tid is None else dict(event, tid=tid)


def kernel(pid, tid, ts, dur):
    return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": "fusion"}


def test_busy_time_is_the_union_of_the_streams_kernels(tmp_path):
    write_trace(tmp_path, [
        metadata("process_name", 1, "/host:CPU"),
        metadata("process_name", 2, "/device:GPU:0 (NVIDIA H100 80GB HBM3)"),
        metadata("thread_name", 2, "Stream #13(Compute)", tid=13),
        metadata("thread_name", 2, "Stream #14(MemcpyD2H)", tid=14),
        metadata("thread_name", 2, "XLA Ops", tid=15),
        kernel(1, 7, 0, 1_000),  # the host's own events
        kernel(2, 13, 10, 20), kernel(2, 13, 25, 10),  # overlap: [10, 35)
        kernel(2, 14, 100, 5),  # another stream
        kernel(2, 15, 10, 95),  # the ops line restating them
    ])
    assert device_timeline(str(tmp_path)) == {"kernels": 3, "busy_us": 30.0}


def test_a_cpu_trace_has_no_device_timeline(tmp_path):
    write_trace(tmp_path, [metadata("process_name", 1, "/host:CPU"), kernel(1, 7, 0, 10)])
    assert device_timeline(str(tmp_path)) is None
    assert device_timeline(str(tmp_path / "missing")) is None
