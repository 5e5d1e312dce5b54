"""What holds a compiled step's memory at its peak: the buffers live at that point of XLA's
schedule, each with its shape, dtype, the op that made it and the source line that op came from.

XLA writes what it knows about a module's memory when asked to dump it (`xla_dump_to`, passed
as a compiler option of that one compile): its live ranges over the schedule, with the values
live at the peak (`*-live-range.txt`), the buffer assignment, with each value's shape and the
bytes its layout takes, padding included (`*-buffer-assignment.txt`), and the optimized HLO,
whose ops carry JAX's op name and a stack frame naming the file and line that traced them. This
module reads those three files; nothing in them is estimated by us.

The list groups buffers that share a source line, shape and dtype (one per layer of an unrolled
stack, say), so a step's 12 copies of one activation show as one row with its count. Buffers in
a chip's on-core memory (a layout with a memory space S(n), n > 0: VMEM prefetches on TPU) are
left out: the peak that decides what fits is HBM's.
"""

import collections
import dataclasses
import glob
import os
import re

# The dump options of one compile: the optimized module's text and its memory files.
DUMP_OPTIONS = {"xla_dump_hlo_as_text": True}

# `    fusion.12{}: 1048576 bytes (cumulative: ...)` under `Live ranges at N (peak):`
_PEAK_ENTRY = re.compile(r"^\s+(\S+?\{[\d,]*\}): (\d+) bytes")
# ` value: <19 copy-start{0} @1> (size=1048576,offset=0): f32[512,512]{1,0:T(8,128)S(1)}`
# (a value at the top of its instruction's output prints no index: `<13 x.1 @0>` is `x.1{}`)
_VALUE = re.compile(
    r"^\s*value: <\d+ ([^\s{]+)(\{[\d,]*\})? @\d+> \(size=(\d+),offset=\d+\): (\S+)"
)
_SHAPE = re.compile(r"^(\w+)\[([\d,]*)\](?:\{([^}]*)\})?")
_MEMORY_SPACE = re.compile(r"S\((\d+)\)")
# `  ROOT %fusion.3 = bf16[8,128]{1,0} fusion(...), ..., metadata={op_name="..." ...}`
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (?:.*?metadata=\{([^}]*)\})?")
_COMPUTATION = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{$")
_CALLS = re.compile(r"calls=%?([\w.\-]+)")
_PARAMETER = re.compile(r" parameter\(\d+\)")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OP_PARTS = 3  # of an op name's parts printed: enough to name the layer and the primitive
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_SOURCE = re.compile(r'source_file="([^"]*)" source_line=(\d+)')


@dataclasses.dataclass(frozen=True)
class Buffers:
  """Buffers live at the peak that share a source line, shape and dtype."""

  dtype: str
  shape: tuple
  count: int
  bytes: int  # all `count` of them, as XLA sizes them (padded layouts included)
  op: str  # JAX's op name of one of them, the jit(...) prefix removed
  source: str  # file:line that traced it, "an input of the step" (params, state, batch) or ""


@dataclasses.dataclass(frozen=True)
class Peak:
  """The peak of one compiled module, from XLA's own memory files."""

  total_bytes: int  # everything live at the peak, on-core memory included
  groups: list  # Buffers, largest first
  bytes_by_dtype: dict  # dtype -> bytes live at the peak (HBM only)

  def text(self, rows: int = 12) -> str:
    lines = [
        "  largest buffers live at the peak (grouped by source line, shape and dtype):",
    ]
    for group in self.groups[:rows]:
      shape = f"{group.dtype}[{','.join(map(str, group.shape))}]"
      count = f"{group.count} x " if group.count > 1 else ""
      where = group.source or "?"
      lines.append(f"    {_gib(group.bytes):>9}  {count}{shape}  {where}  ({group.op})")
    dtypes = ", ".join(f"{dtype} {_gib(n)}" for dtype, n in self.bytes_by_dtype.items())
    lines.append(f"  live at the peak by dtype: {dtypes}")
    return "\n".join(lines)


def _gib(count: int) -> str:
  return f"{count / 2**30:.2f} GiB" if count >= 2**27 else f"{count / 2**20:.1f} MiB"


def _files(dump_dir: str, suffix: str) -> list[str]:
  return sorted(glob.glob(os.path.join(dump_dir, f"*{suffix}")))


def _stack_frames(hlo_text: str) -> dict[int, str]:
  """Stack frame id -> "file:line", from the module's FileNames/FileLocations/StackFrames."""
  tables, current = collections.defaultdict(dict), None
  for line in hlo_text.splitlines():
    if line.startswith(("%", "ENTRY")):
      break  # the computations follow the tables
    if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
      current = line
    elif not line.strip():
      current = None
    elif current:
      key, _, value = line.partition(" ")
      tables[current][int(key)] = value
  names = {k: v.strip('"') for k, v in tables["FileNames"].items()}
  frames = {}
  for frame_id, frame in tables["StackFrames"].items():
    location = tables["FileLocations"].get(int(re.search(r"file_location_id=(\d+)", frame)[1]))
    if location:
      file_id = int(re.search(r"file_name_id=(\d+)", location)[1])
      line = re.search(r"\bline=(\d+)", location)[1]
      frames[frame_id] = f"{names.get(file_id, '?')}:{line}"
  return frames


def _instruction_origins(hlo_text: str) -> dict[str, tuple[str, str]]:
  """Instruction name -> (op name, where it came from: "file:line", "an input of the step" for
  the entry computation's parameters, or ""). A fusion XLA left without metadata gets its fused
  computation's last op that has some (the fusion's output is that op's)."""
  frames, origins, in_entry = _stack_frames(hlo_text), {}, False
  computation_origin, computation, fusion_calls = {}, None, {}
  for line in hlo_text.splitlines():
    header = _COMPUTATION.match(line)
    if header:
      computation, in_entry = header[2], bool(header[1])
      continue
    match = _INSTRUCTION.match(line)
    if not match:
      continue
    metadata = match[2] or ""
    op = _OP_NAME.search(metadata)
    source = _SOURCE.search(metadata)
    frame = _FRAME_ID.search(metadata)
    if in_entry and _PARAMETER.search(line):
      where = "an input of the step"
    elif source:
      where = _package_relative(f"{source[1]}:{source[2]}")
    else:
      where = _package_relative(frames.get(int(frame[1]), "")) if frame else ""
    origins[match[1]] = (_short_op(op[1]) if op else "", where)
    if op and where:
      computation_origin[computation] = origins[match[1]]
    calls = _CALLS.search(line)
    if calls and not op:
      fusion_calls[match[1]] = calls[1]
  for name, called in fusion_calls.items():
    origins[name] = computation_origin.get(called, origins[name])
  return origins


def _package_relative(source: str) -> str:
  """A file of this repository from its root (vit_jax/models/layers.py:67), an installed
  package's from its package's folder (flax/linen/linear.py:287)."""
  if source.startswith(_REPO + os.sep):
    return source[len(_REPO) + 1 :]
  return re.sub(r"^.*/(?:site|dist)-packages/", "", source)


def _short_op(op: str) -> str:
  """The last parts of JAX's op name (of the first op, where a fusion lists several): the module
  and the primitive, e.g. MlpBlock_3/Dense_0/dot_general."""
  parts = [part for part in op.split(";")[0].split("/") if not part.startswith("jit(")]
  return "/".join(parts[-_OP_PARTS:])


def _peak_entries(live_range_text: str) -> list[tuple[str, int]]:
  entries, inside = [], False
  for line in live_range_text.splitlines():
    if re.match(r"^\s*Live ranges at \d+ \(peak\):", line):
      inside = True
      continue
    if inside:
      match = _PEAK_ENTRY.match(line)
      if not match:
        break
      entries.append((match[1], int(match[2])))
  return entries


def read(dump_dir: str) -> Peak | None:
  """The peak of the largest module XLA dumped into `dump_dir` (a step compiles one module; the
  largest peak is the step's when helpers compiled beside it). None if nothing was dumped, as
  when the compiled step came from a compilation cache."""
  best = None
  for live_range_file in _files(dump_dir, "-live-range.txt"):
    prefix = live_range_file[: -len("-live-range.txt")]
    with open(live_range_file) as f:
      entries = _peak_entries(f.read())
    total = sum(n for _, n in entries)
    if best is None or total > best[0]:
      best = (total, prefix, entries)
  if best is None:
    return None
  total, prefix, entries = best
  with open(prefix + "-buffer-assignment.txt") as f:
    # The live ranges give a value's bytes as its shape's; the assignment gives what it takes in
    # its layout (a TPU's tiles pad a bf16[..., 64] array to 128 lanes: twice the bytes).
    shapes, assigned = {}, {}
    for line in f:
      match = _VALUE.match(line)
      if match:
        name = match[1] + (match[2] or "{}")
        shapes[name], assigned[name] = match[4], int(match[3])
  with open(prefix + ".txt") as f:
    origins = _instruction_origins(f.read())
  grouped = collections.defaultdict(lambda: [0, 0, ""])  # (source, dtype, shape) -> count, bytes
  by_dtype = collections.Counter()
  for value, size in entries:
    size = assigned.get(value, size)
    shape = _SHAPE.match(shapes.get(value, ""))
    if shape is None:  # a tuple's index table: a few bytes of pointers
      continue
    space = _MEMORY_SPACE.search(shape[3] or "")
    if space and int(space[1]) > 0:
      continue
    op, source = origins.get(value.partition("{")[0], ("", ""))
    dims = tuple(int(d) for d in shape[2].split(",") if d)
    group = grouped[(source, shape[1], dims)]
    group[0] += 1
    group[1] += size
    group[2] = group[2] or op
    by_dtype[shape[1]] += size
  groups = [
      Buffers(dtype=dtype, shape=dims, count=count, bytes=size, op=op, source=source)
      for (source, dtype, dims), (count, size, op) in grouped.items()
  ]
  groups.sort(key=lambda g: -g.bytes)
  return Peak(total_bytes=total, groups=groups, bytes_by_dtype=dict(by_dtype.most_common()))
