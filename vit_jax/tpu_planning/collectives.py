"""The collectives of a compiled step, read from its HLO text: how many run per step, and the bytes
each device sends, by kind.

Bytes are counted per device per step: what one device must send for the op to complete, from
the op's result shape (compiled HLO prints no operand shapes) and its group size n, with the
bandwidth-optimal algorithms' volumes (a ring, or a pairwise exchange):

  all-reduce          2 (n-1)/n x the array   (a reduce-scatter, then an all-gather)
  all-gather          (n-1)/n x the result    (every device receives the other n-1 shards)
  reduce-scatter      (n-1) x the result      (each of the other devices' shards, once)
  all-to-all          (n-1)/n x the array
  collective-permute  the array, when the device is a source

No algorithm sends less for an all-reduce, all-gather or reduce-scatter, so each figure is a
lower bound on the traffic of that op. An op inside a loop counts once per iteration (XLA's
`known_trip_count`; once if unknown), a conditional its cheapest branch.

On TPU, XLA writes some reduce-scatters as an all-reduce inside a fusion named
`all-reduce-scatter` (the all-reduce followed by each device's slice): those count as
reduce-scatters. In a multi-slice job each slice compiles its own module; traffic between slices
is `send` ops that the Megascale runtime carries over the data-center network
(`_xla_megascale_transfer_type`), with n the number of slices: counted as DCN bytes. Everything
else is ICI traffic within the slice.
"""

import dataclasses
import math
import re

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")

# Bytes per element by HLO type name (sub-byte types rounded up: XLA packs them, so a bound stays
# a bound only if the array is large; these never carry collectives in our steps).
_ITEM_BYTES = {
    "pred": 1,
    "s4": 1,
    "u4": 1,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}
# Megascale's transfer types (`_xla_megascale_transfer_type` on a send) -> our kinds.
_DCN_KINDS = {
    "ALL_REDUCE": "all-reduce",
    "ALL_GATHER": "all-gather",
    "REDUCE_SCATTER": "reduce-scatter",
    "ALL_TO_ALL": "all-to-all",
}

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) \(.*\) -> .*\{$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = (.*?) ([a-z][\w\-]*)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")
_CALLEE = re.compile(r"\b(?:calls|body|to_apply)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}|true_computation=%?([\w.\-]+)")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"')


@dataclasses.dataclass
class Traffic:
  """One kind of collective in one step: ops run, and the bytes each device sends."""

  ops: int = 0
  ici_bytes: float = 0.0  # within the slice
  dcn_bytes: float = 0.0  # between slices

  def add(self, other: "Traffic", times: int = 1) -> None:
    self.ops += other.ops * times
    self.ici_bytes += other.ici_bytes * times
    self.dcn_bytes += other.dcn_bytes * times


def _array_bytes(shape: str) -> list[int]:
  """Bytes of each array in an HLO shape (a tuple gives several; token[] none)."""
  sizes = []
  for dtype, dims in _ARRAY.findall(shape):
    if dtype not in _ITEM_BYTES:
      continue
    count = 1
    for d in filter(None, dims.split(",")):
      count *= int(d)
    sizes.append(count * _ITEM_BYTES[dtype])
  return sizes


def _group_size(attributes: str, num_partitions: int) -> int:
  """Devices in each replica group: {{0,1,2,3},...}; the iota form [groups,size]<=[...]; over
  named axes of a device mesh, mesh['axis_0'=4,'axis_1'=2] {'axis_0'}; or {} (all of the
  module's partitions)."""
  mesh = re.search(r"replica_groups=mesh\[([^\]]*)\] \{([^}]*)\}", attributes)
  if mesh:
    sizes = dict(re.findall(r"'([^']+)'=(\d+)", mesh.group(1)))
    return math.prod(int(sizes[axis]) for axis in re.findall(r"'([^']+)'", mesh.group(2)))
  iota = re.search(r"replica_groups=\[\d+,(\d+)\]", attributes)
  if iota:
    return int(iota.group(1))
  listed = re.search(r"replica_groups=\{\{([\d,]*)\}", attributes)
  if listed:
    return len(listed.group(1).split(","))
  return num_partitions


def _sent(kind: str, array_bytes: float, n: int) -> float:
  if n <= 1:
    return 0.0
  if kind == "all-reduce":
    return 2 * (n - 1) / n * array_bytes
  if kind == "reduce-scatter":  # array_bytes: the whole operand
    return (n - 1) / n * array_bytes
  if kind in ("all-gather", "all-to-all"):
    return (n - 1) / n * array_bytes
  return array_bytes  # collective-permute and other point-to-point transfers


def _op_traffic(op, shape, attributes, computation, num_partitions, num_slices):
  """(kind, Traffic) of one instruction, or None if it is not a collective."""
  base = op.removesuffix("-start")
  arrays = _array_bytes(shape)
  if op == "send" and "_xla_megascale_transfer_type" in attributes:
    transfer = re.search(r'_xla_megascale_transfer_type="(\w+)"', attributes).group(1)
    kind = _DCN_KINDS.get(transfer, "collective-permute")
    shard = arrays[0] if arrays else 0
    volume = shard * num_slices if kind == "all-gather" else shard
    return kind, Traffic(1, 0.0, _sent(kind, volume, num_slices))
  if base not in KINDS or op.endswith("-done"):
    return None
  n = _group_size(attributes, num_partitions)
  if base == "all-gather" and op.endswith("-start"):
    arrays = arrays[len(arrays) // 2 :]  # (operands..., results...)
  elif base == "collective-permute":
    sends = re.search(r"source_target_pairs=\{\{", attributes)
    # The sent array (a -start also carries its result and sync flags); nothing without pairs.
    return base, Traffic(1, float(arrays[0]) if sends and arrays else 0.0, 0.0)
  volume = sum(arrays)
  kind = base
  if base == "all-reduce" and computation.startswith("all-reduce-scatter"):
    kind = "reduce-scatter"
  elif base == "reduce-scatter":
    volume *= n  # the result is one shard of the reduced operand
  return kind, Traffic(1, _sent(kind, volume, n), 0.0)


def collective_traffic(hlo_text: str, num_slices: int = 1) -> dict[str, Traffic]:
  """{kind: Traffic} per step of a compiled module's HLO text (`compiled.as_text()`), for every
  kind in KINDS."""
  partitions = re.search(r"num_partitions=(\d+)", hlo_text)
  num_partitions = int(partitions.group(1)) if partitions else 1
  own = {}  # computation -> {kind: Traffic} of its own instructions
  calls = {}  # computation -> [(callee computations, times; one entry per call site)]
  entry, current = None, None
  for line in hlo_text.splitlines():
    header = _COMPUTATION.match(line)
    if header:
      current = header.group(1)
      own[current], calls[current] = {}, []
      entry = current if line.startswith("ENTRY") else entry
      continue
    match = _INSTRUCTION.match(line) if current else None
    if not match:
      continue
    shape, op, rest = match.groups()
    found = _op_traffic(op, shape, rest, current, num_partitions, num_slices)
    if found:
      own[current].setdefault(found[0], Traffic()).add(found[1])
    if op in ("async-done", "async-update"):  # the same computation as its async-start
      continue
    branches = _BRANCHES.search(rest)
    if op == "conditional" and branches:
      names = branches.group(1) or " ".join(re.findall(r"_computation=%?([\w.\-]+)", rest))
      calls[current].append(([n.strip().lstrip("%") for n in re.split(r"[,\s]+", names) if n], 1))
      continue
    trip = _TRIP_COUNT.search(rest)
    times = int(trip.group(1)) if op == "while" and trip else 1
    for callee in _CALLEE.findall(rest):
      calls[current].append(([callee], times))

  totals_of = {}

  def totals(name: str) -> dict[str, Traffic]:
    if name not in totals_of:
      result = {k: Traffic() for k in KINDS}
      for kind, traffic in own.get(name, {}).items():
        result[kind].add(traffic)
      for callees, times in calls.get(name, []):
        options = [totals(c) for c in callees if c in own]
        if options:  # a conditional: its cheapest branch
          cheapest = min(options, key=lambda t: sum(x.ici_bytes + x.dcn_bytes for x in t.values()))
          for kind, traffic in cheapest.items():
            result[kind].add(traffic, times)
      totals_of[name] = result
    return totals_of[name]

  if entry is None:
    return {k: Traffic() for k in KINDS}
  return totals(entry)
