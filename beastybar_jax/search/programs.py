"""What a compiled search program does inside its simulation loop, read from its text.

Two views of one program, for two questions:

* **StableHLO** (``jax.jit(f).lower(...).as_text()``, or ``jax.export`` for a platform
  that is not present, so a GPU program can be read on a CPU): does the loop body hold
  a host round trip? On a GPU, XLA's runtime copies the condition of a ``while`` whose
  trip count it does not know to the host at every iteration, and the predicate of every
  ``case``/``if`` too. A loop written with static bounds (``lax.fori_loop(0, n)``,
  ``lax.scan``) lowers to a ``while`` whose condition compares its counter with a
  constant: that one runs without a round trip. A Pallas kernel is one ``custom_call``;
  its own loops run on the device.
* **XLA's optimized HLO** (``compiled.as_text()``): how many top-level operations
  (fusions, scatters, library calls) the simulation loop body runs per simulation: on a
  GPU each is a kernel launch, and at thousands of games each kernel is small, so their
  number sets the time of a simulation.

:func:`loop_structure` answers the first, :func:`loop_ops` the second; both find the
simulation loop as the loop whose trip count is the number of simulations.
"""

from __future__ import annotations

import collections
import dataclasses
import re

# ----------------------------------------------------------------------------- StableHLO

_FUNC = re.compile(r"^\s*func\.func (?:public |private )?@([\w.\-$]+)\(")
_CALL = re.compile(r"\b(?:func\.)?call @([\w.\-$]+)\(")
_CONSTANT = re.compile(r"^\s*(%[\w#\-]+) = stablehlo\.constant dense<(-?\d+)> : tensor<i\d+>")
_COMPARE = re.compile(r"stablehlo\.compare\s+(LT|LE|GT|GE|NE),\s*(%[\w#\-]+),\s*(%[\w#\-]+)")
_OP = re.compile(r"(?:^|= )\"?stablehlo\.([a-z_]+)")
_CUSTOM_CALL = re.compile(r"stablehlo\.custom_call @([\w.\-$]+)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _depth_change(line: str) -> int:
    """Braces opened minus closed on ``line``, outside string literals (a Pallas kernel's
    IR travels as a string of bytes)."""
    code = _STRING.sub("", line)
    return code.count("{") - code.count("}")


@dataclasses.dataclass(frozen=True)
class LoopStructure:
    """The simulation loop of a StableHLO program.

    Attributes:
      trip_count: the loop's constant bound (the number of simulations).
      unbounded_loops: ``while`` ops inside it (called functions included) whose condition
        is not a counter against a constant: each a host round trip per iteration on a GPU.
      conditionals: ``case``/``if`` ops inside it: each a host round trip on a GPU.
      bounded_loops: the other ``while`` ops inside it, as their constant bounds.
      kernels: the ``custom_call`` targets inside it (``__gpu$xla.gpu.triton``: a Pallas kernel).
    """

    trip_count: int
    unbounded_loops: tuple[str, ...]
    conditionals: tuple[str, ...]
    bounded_loops: tuple[int, ...]
    kernels: tuple[str, ...]

    @property
    def host_round_trips(self) -> tuple[str, ...]:
        """Every op inside the loop that stops the device for the host on a GPU."""
        return self.unbounded_loops + self.conditionals


def _functions(text: str) -> dict[str, list[str]]:
    """Function name -> its lines (the body between the header and its closing brace)."""
    functions, name, depth, lines = {}, None, 0, []
    for line in text.splitlines():
        header = _FUNC.match(line)
        if header and name is None:
            name, depth, lines = header.group(1), 0, []
        if name is None:
            continue
        lines.append(line)
        depth += _depth_change(line)
        if depth <= 0:
            functions[name] = lines
            name = None
    return functions


def _region_end(lines: list[str], start: int) -> int:
    """Index of the line closing the op that starts at ``lines[start]`` (brace counting)."""
    depth = 0
    for i in range(start, len(lines)):
        depth += _depth_change(lines[i])
        if depth <= 0 and i > start:
            return i
    return len(lines) - 1


def _whiles(lines: list[str]):
    """``(condition lines, body lines)`` of each top-level-or-nested ``while`` in ``lines``."""
    for i, line in enumerate(lines):
        if "stablehlo.while(" not in line:
            continue
        end = _region_end(lines, i)
        region = lines[i + 1:end + 1]
        split = next((j for j, l in enumerate(region) if "} do {" in l), len(region))
        yield region[:split], region[split + 1:]


def _constant_bound(condition: list[str], constants: dict[str, int]):
    """The constant a counting loop's condition compares with, or None."""
    if len(condition) > 4:  # a counter's condition is one compare and its return
        return None
    for line in condition:
        compare = _COMPARE.search(line)
        if compare:
            for operand in compare.group(2, 3):
                if operand in constants:
                    return constants[operand]
    return None


def loop_structure(stablehlo_text: str, trip_count: int) -> LoopStructure:
    """The :class:`LoopStructure` of the loops of ``trip_count`` iterations (the simulation
    loops: a program may search more than once), together. Raises ``ValueError`` if none."""
    functions = _functions(stablehlo_text)
    # SSA names are scoped by function: each function's integer constants apart.
    constants = {name: {m.group(1): int(m.group(2)) for line in lines if (m := _CONSTANT.match(line))}
                 for name, lines in functions.items()}
    candidates = [(name, body) for name, lines in functions.items() for condition, body in _whiles(lines)
                  if _constant_bound(condition, constants[name]) == trip_count]
    if not candidates:
        raise ValueError(f"no loop of {trip_count} iterations in the program")
    chunks = [chunk for name, body in candidates for chunk in _inside(name, body, functions)]
    unbounded, bounded, conditionals, kernels = [], [], [], []
    for name, lines in chunks:
        for condition, _ in _whiles(lines):
            bound = _constant_bound(condition, constants[name])
            if bound is None:
                unbounded.append(f"@{name}: " + " ".join(l.strip() for l in condition)[:200])
            else:
                bounded.append(bound)
        for line in lines:
            op = _OP.search(line)
            if op and op.group(1) in ("case", "if"):
                conditionals.append(f"@{name}: {line.strip()[:200]}")
            kernel = _CUSTOM_CALL.search(line)
            if kernel:
                kernels.append(kernel.group(1))
    return LoopStructure(trip_count, tuple(unbounded), tuple(conditionals), tuple(bounded), tuple(kernels))


def _inside(function: str, body: list[str], functions: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """``(function, lines)`` of ``body`` (in ``function``) and of every function it calls,
    transitively, each once."""
    chunks, seen, pending = [(function, body)], set(), list(body)
    while pending:
        line = pending.pop()
        for name in _CALL.findall(line):
            if name in functions and name not in seen:
                seen.add(name)
                chunks.append((name, functions[name]))
                pending += functions[name]
    return chunks


# ----------------------------------------------------------------------------- XLA's optimized HLO

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$")
_INSTRUCTION = re.compile(r"^(?:ROOT )?%[\w.\-]+ = .*? ([a-z][\w\-]*)\(")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_BODY = re.compile(r"\bbody=%?([\w.\-]+)")
_TO_APPLY = re.compile(r"\bto_apply=%?([\w.\-]+)")
# Bookkeeping that launches nothing.
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "after-all", "partition-id",
         "replica-id", "opt-barrier"}


@dataclasses.dataclass(frozen=True)
class LoopOps:
    """The top-level operations of the simulation loop's body in XLA's optimized HLO.

    Attributes:
      total: their number (each a kernel launch on a GPU, roughly).
      by_opcode: their number per opcode (``fusion``, ``scatter``, ``custom-call``...).
      nested_loops: the loops inside the body, as ``(ops in their body, known trip count
        or None)``: a loop's body runs once per iteration.
      bytes: the bytes its operations read and write in one iteration, estimated from
        their operands' and results' shapes (:func:`op_bytes`): with ``bytes_by_scope``,
        where a memory-bound loop spends its time.
      bytes_by_scope: ``bytes`` split by the ``scopes`` given to :func:`loop_ops`
        (``jax.named_scope`` and flax module names in each op's metadata; "other": none).
    """

    total: int
    by_opcode: dict
    nested_loops: tuple
    bytes: int = 0
    bytes_by_scope: dict = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        top = ", ".join(f"{n} {op}" for op, n in sorted(self.by_opcode.items(), key=lambda kv: -kv[1]))
        nested = "".join(f"; a loop of {ops} ops x {count or 'unknown'}" for ops, count in self.nested_loops)
        return f"{self.total} ops ({top}){nested}; ~{self.bytes / 1e6:.1f} MB"


def computations_of(text: str) -> dict[str, list[str]]:
    """XLA's optimized HLO text as computation name -> its instruction lines (stripped)."""
    computations, current = {}, None
    for line in text.splitlines():
        header = _COMPUTATION.match(line)
        if header and not line.startswith(" "):
            current = computations.setdefault(header.group(1), [])
        elif line.strip() == "}":
            current = None
        elif current is not None and line.strip():
            current.append(line.strip())
    return computations


def _opcodes(lines: list[str]) -> collections.Counter:
    counts = collections.Counter()
    for line in lines:
        match = _INSTRUCTION.match(line)
        if match and match.group(1) not in _FREE:
            counts[match.group(1)] += 1
    return counts


def _flattened(computations: dict[str, list[str]], name: str) -> list[str]:
    """The lines of ``name`` with each ``call`` replaced by the lines it calls (XLA:CPU
    outlines parts of a body into called computations that run inline)."""
    lines = []
    for line in computations[name]:
        match = _INSTRUCTION.match(line)
        if match and match.group(1) == "call" and (target := _TO_APPLY.search(line)):
            lines += _flattened(computations, target.group(1))
        else:
            lines.append(line)
    return lines


_TYPE = re.compile(r"\b(pred|bf16|[suf]\d+|f8\w*)\[([\d,]*)\]")
_DTYPE_BITS = re.compile(r"[a-z]+(\d+)")  # s32 -> 32, f8e4m3fn -> 8
_NAME = re.compile(r"%[\w.\-]+")
_CALLS = re.compile(r"\bcalls=%?([\w.\-]+)")
_OP_NAME = re.compile(r'op_name="([^"]+)"')
_READS_PART = {"gather", "dynamic-slice", "slice"}
_WRITES_IN_PLACE = {"scatter", "dynamic-update-slice"}


def _type_bytes(text: str) -> int:
    """Bytes of the arrays in an HLO type (``f32[4096,31]{1,0}``, or a tuple of them)."""
    total = 0
    for dtype, dims in _TYPE.findall(text):
        size = 1 if dtype == "pred" else max(1, int(_DTYPE_BITS.match(dtype).group(1)) // 8)
        for d in filter(None, dims.split(",")):
            size *= int(d)
        total += size
    return total


def _instructions(lines: list[str]) -> dict:
    """name -> (opcode, result bytes, operand names, line) of a computation's instructions."""
    table = {}
    for line in lines:
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, rest = line.removeprefix("ROOT ").split(" = ", 1)
        result_type, _, call = rest.partition(f" {match.group(1)}(")
        table[name] = (match.group(1), _type_bytes(result_type), _NAME.findall(call.split(")", 1)[0]), line)
    return table


def op_bytes(line: str, table: dict, computations: dict) -> int:
    """Bytes one top-level operation reads and writes, estimated from shapes: its
    operands and its result, except that an operand a fusion only gathers or slices
    counts what is read of it, and one it only updates in place (a scatter's, a
    dynamic-update-slice's target) counts nothing, nor does the result it aliases.
    An estimate: caches, a library call's own access pattern and a kernel's re-reads
    are not modelled."""
    opcode, result, operands, _ = table[line.removeprefix("ROOT ").split(" = ", 1)[0]]
    calls = _CALLS.search(line) if opcode == "fusion" else None
    fused = _instructions(computations.get(calls.group(1), [])) if calls else {}
    params = {int(m.group(1)): name for name, (op, _, _, text) in fused.items()
              if op == "parameter" and (m := re.search(r"parameter\((\d+)\)", text))}
    total = 0
    for i, operand in enumerate(operands):
        size = table.get(operand, (None, 0))[1]
        users = [u for u in fused.values() if i in params and params[i] in u[2]]
        if users and all(u[0] in _READS_PART and u[2][0] == params[i] for u in users):
            size = sum(u[1] for u in users)
        elif users and all(u[0] in _WRITES_IN_PLACE and u[2][0] == params[i] for u in users):
            size, result = 0, 0 if len(users) == 1 and users[0][3].startswith("ROOT") else result
        total += size
    if opcode in _READS_PART:
        total = 2 * result
    elif opcode in _WRITES_IN_PLACE:  # reads its updates and indices, writes the updates
        total, result = 2 * sum(table.get(o, (None, 0))[1] for o in operands[1:]), 0
    return total + result


# The scopes of a simulation (``device_loop.simulate_once``'s and the network's), to split
# its bytes by: the engine is what ``expand`` holds outside the network.
SIMULATION_SCOPES = ("root_rule", "walk", "expand", "backup", "cached_choices", "PolicyValueNet", "afterstates")


def scope_label(by_scope: dict) -> str:
    """``by_scope`` (bytes) as ``"name MB, ..."``, largest first."""
    return ", ".join(f"{name} {size / 1e6:.0f}" for name, size in sorted(by_scope.items(), key=lambda kv: -kv[1])
                     if size >= 0.5e6)


def loop_ops(hlo_text: str, trip_count: int, scopes: tuple[str, ...] = SIMULATION_SCOPES) -> LoopOps:
    """:class:`LoopOps` of the loop with ``trip_count`` iterations (the largest if several).
    ``scopes``: names to split the bytes by, each op counted under the last of them in
    its metadata's ``op_name``. Raises ``ValueError`` if XLA found no loop with that count."""
    computations = computations_of(hlo_text)
    bodies = [_BODY.search(line).group(1) for lines in computations.values() for line in lines
              if " while(" in line and (m := _TRIP_COUNT.search(line)) and int(m.group(1)) == trip_count]
    if not bodies:
        raise ValueError(f"no loop with a known trip count of {trip_count} in the program")
    body = max((_flattened(computations, b) for b in bodies), key=lambda lines: sum(_opcodes(lines).values()))
    counts = _opcodes(body)
    nested = []
    for line in body:
        if " while(" in line:
            trip = _TRIP_COUNT.search(line)
            inner = _flattened(computations, _BODY.search(line).group(1))
            nested.append((sum(_opcodes(inner).values()), int(trip.group(1)) if trip else None))
    table, by_scope = _instructions(body), collections.Counter()
    for name, (opcode, _, _, line) in table.items():
        if opcode in _FREE:
            continue
        op_name = _OP_NAME.search(line)
        parts = op_name.group(1).split("/") if op_name else []
        scope = max((s for s in scopes if s in parts), key=lambda s: max(i for i, p in enumerate(parts) if p == s),
                    default="other")
        by_scope[scope] += op_bytes(line, table, computations)
    return LoopOps(sum(counts.values()), dict(counts), tuple(nested), sum(by_scope.values()), dict(by_scope))
