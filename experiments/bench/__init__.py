"""The subcommands of ``experiments/benchmark.py``, one module each, over :mod:`bench.common`
(argument types, the machine line, timing with compile time apart, rich tables, the JSON
report)."""
