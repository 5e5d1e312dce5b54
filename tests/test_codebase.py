"""Checks on the code and its documents: no import cycles, commands imported by nothing below them,
no module past MAX_LINES but a table, workdir file names spelled only in vit_jax/workdir.py, each
registry fact in one table, how many modules a run imports, the command lists of README.md and
vit_jax/startup.py, and each measured figure written in one document."""

import ast
import glob
import os
import re
import subprocess
import sys

from vit_jax import evaluate as evaluator_registry
from vit_jax import models
from vit_jax import tasks
from vit_jax import workdir
from vit_jax.config import checks as config_checks
from vit_jax.config import defaults
from vit_jax.data import tfds_builders
from vit_jax.data.text import datasets as text_datasets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "vit_jax"

# Import cycles allowed, each as the set of modules that reach each other: none. The test keeps
# every cycle from coming back.
KNOWN_CYCLES = set()


def module_files() -> dict[str, str]:
  """{dotted module name: path} of every module in the vit_jax package."""
  modules = {}
  for folder, _, files in os.walk(os.path.join(ROOT, PACKAGE)):
    for name in files:
      if name.endswith(".py"):
        parts = os.path.relpath(os.path.join(folder, name), ROOT)[:-3].split(os.sep)
        if parts[-1] == "__init__":
          parts = parts[:-1]
        modules[".".join(parts)] = os.path.join(folder, name)
  return modules


def imported_modules(module: str, path: str, modules) -> set[str]:
  """Our modules that `module` imports anywhere in its file (function-level imports included).

  `from a.b import c` is an import of module a.b.c when that is a module, else of a.b. A parent
  package's __init__ that runs first is not counted: Python resolves that without a cycle.
  """
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  is_package = path.endswith("__init__.py")
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:  # relative: from a package, level 1 is the package itself
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(anchor + ([base] if base else []))
      for alias in node.names:
        found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
  return {name for name in found if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
  modules = module_files()
  return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def cycles(graph) -> dict[frozenset[str], list[str]]:
  """{modules that import each other in a circle: one such path, e.g. [a, b, a]} (Tarjan's SCCs)."""
  index, low, stack, on_stack, components = {}, {}, [], set(), {}

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in sorted(graph[node]):
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        components[frozenset(component)] = _path_through(graph, sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return components


def _path_through(graph, component) -> list[str]:
  """A cycle start -> ... -> start inside `component` (breadth-first, so a shortest one)."""
  start, members = component[0], set(component)
  parents, frontier = {start: None}, [start]
  while frontier:
    nxt_frontier = []
    for node in frontier:
      for nxt in sorted(graph[node] & members):
        if nxt == start:
          path = [node]
          while parents[path[-1]] is not None:
            path.append(parents[path[-1]])
          return path[::-1] + [start]
        if nxt not in parents:
          parents[nxt] = node
          nxt_frontier.append(nxt)
    frontier = nxt_frontier
  raise AssertionError(f"no cycle through {start} in {component}")


def test_import_graph_sees_function_level_and_relative_imports():
  graph = import_graph()
  assert "vit_jax.training.train" in graph["vit_jax.main"]  # imported inside main()
  assert "vit_jax.startup" in graph["vit_jax.data.image"]
  assert graph["vit_jax.interop"], "the interop package imports its modules"


def test_cycles_finds_each_circle_with_a_path():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a", "f"}, "f": {"e"}}
  assert cycles(graph) == {frozenset("abc"): ["a", "b", "c", "a"], frozenset("ef"): ["e", "f", "e"]}


def test_no_import_cycles_beyond_the_known_ones():
  found = cycles(import_graph())
  described = "\n".join(
      f"{' -> '.join(path)}  (cycle among {', '.join(sorted(members))})"
      for members, path in found.items()
  )
  assert set(found) == KNOWN_CYCLES, (
      f"import cycles (new ones must be broken; removed ones deleted from KNOWN_CYCLES):\n"
      f"{described}"
  )


# A module longer than this holds more than one job: split it by them. A table (data, not logic)
# may be longer, each with what it holds.
MAX_LINES = 600
LONG_TABLES = {"vit_jax/data/image/imagenet_names.py": "ImageNet's 1000 class names"}


def test_no_module_passes_the_line_cap():
  lines = {}
  for path in module_files().values():
    with open(path, encoding="utf-8") as f:
      lines[os.path.relpath(path, ROOT)] = sum(1 for _ in f)
  long = {path: n for path, n in lines.items() if n > MAX_LINES and path not in LONG_TABLES}
  assert not long, f"modules past {MAX_LINES} lines (split each by its jobs): {long}"
  short = [path for path in LONG_TABLES if lines[path] <= MAX_LINES]
  assert not short, f"LONG_TABLES lists tables within the cap: {short}"


# The commands: the top-level modules a user runs, and the sweep and analysis packages behind them.
# vit_jax.evaluate holds the evaluators the trainer runs (a library) and, in its __main__, the
# command that runs them on a checkpoint.
COMMANDS = (
    "vit_jax.main",
    "vit_jax.generate",
    "vit_jax.convert",
    "vit_jax.visualize",
    "vit_jax.predict",
    "vit_jax.compile",
    "vit_jax.prepare",
    "vit_jax.sweep",
    "vit_jax.evaluate.__main__",
)
LIBRARIES = ("models", "data", "tasks", "interop", "training", "config", "evaluate")


def test_libraries_import_no_command():
  graph = import_graph()
  upward = sorted(
      f"{module} imports {target}"
      for module, targets in graph.items()
      if module.count(".") and module.split(".")[1] in LIBRARIES
      for target in targets
      if any(target == c or target.startswith(c + ".") for c in COMMANDS)
  )
  assert not upward, f"libraries must not import commands (move the shared code down): {upward}"


# A string equal to a workdir name that is another file's name, with the reason.
OTHER_FILES_OF_THE_SAME_NAME = {
    ("vit_jax/interop/hf_format.py", "config.json"): "a Hugging Face directory's config",
}


def _non_docstring_strings(tree):
  """String constants but docstrings, dict keys and `.get(key)` keys (a record's "tokenizer")."""
  skipped = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Dict):
      skipped.update(id(key) for key in node.keys if key is not None)
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args:
      skipped.add(id(node.args[0]))
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
      if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        skipped.add(id(body[0].value))
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
      yield node


def test_workdir_file_names_are_spelled_only_in_the_workdir_module():
  spelled = []
  for module, path in module_files().items():
    if module == "vit_jax.workdir":
      continue
    relative = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for node in _non_docstring_strings(tree):
      if node.value in workdir.FILE_NAMES and (relative, node.value) not in (
          OTHER_FILES_OF_THE_SAME_NAME
      ):
        spelled.append(f"{relative}:{node.lineno}: {node.value!r}")
  assert not spelled, f"use the names in vit_jax/workdir.py instead: {spelled}"


# ---- Each registry fact has one home: what the tables name exists, and nothing restates them --
def test_every_model_row_names_a_task_and_a_class():
  no_task = {name: row.task for name, row in models.MODELS.items() if row.task not in tasks.TASKS}
  assert not no_task, f"model rows whose task is not in vit_jax/tasks TASKS: {no_task}"
  trains_nothing = set(tasks.TASKS) - {row.task for row in models.MODELS.values()}
  assert not trains_nothing, f"tasks no model row names: {sorted(trains_nothing)}"
  for path in models.class_paths():
    assert isinstance(models.load_class(path), type), path
  exported = {name for name in models.__all__ if name not in ("build_model", "MODELS")}
  assert exported == {path.split(".")[1] for path in models.class_paths()}


def test_each_task_names_its_evaluator_and_what_it_reads():
  for name, task in tasks.TASKS.items():
    kind = evaluator_registry.KINDS.get(task.eval_kind)
    assert kind is not None and kind.probes is None, f"{name}: eval_kind {task.eval_kind!r}"
    assert name in evaluator_registry.tasks_of(task.eval_kind)
    assert task.examples == tasks.IMAGES or task.examples in text_datasets.KINDS, name
  for kind in evaluator_registry.KINDS:
    assert evaluator_registry.tasks_of(kind), f"evaluator kind {kind!r} evaluates no task"


def test_every_image_dataset_built_here_registers_its_builder():
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  built_here = {n: r.built_here for n, r in tfds_builders.IMAGE_DATASETS.items() if r.built_here}
  assert built_here, "the offline datasets are rows of IMAGE_DATASETS"
  for name, module in built_here.items():
    assert os.path.isfile(os.path.join(ROOT, PACKAGE, "data", "image", f"{module}.py")), module
    assert tfds_builders.register_built_here(name)
    assert tfds.builder_cls(name).__module__ == f"vit_jax.data.image.{module}"


def test_labeled_text_datasets_carry_their_class_count():
  for name, row in text_datasets.TFDS_DATASETS.items():
    labeled = row.kind == "labeled"
    assert (row.num_classes is not None) == labeled, f"{name}: num_classes {row.num_classes}"


def test_each_allowed_value_list_has_one_home():
  from_modules = set(config_checks.choices({"loss": "softmax_xent"})) - set(defaults.CHOICES)
  # Defined by the modules that read them, not restated in the schema.
  assert from_modules == {
      "loss",
      "optimizer.name",
      "optimizer.schedule",
      "optimizer.cooldown_shape",
  }


# ---- A config key is read one way: `config.key`, the schema's value or an error ----------------
# `.get(name)` reads of a schema key's name that are not of a config, each with why.
NOT_A_CONFIG = {
    ("vit_jax/checkpoint.py", "task"): "a checkpoint's record, compared part by part",
    ("vit_jax/generate.py", "task"): "a checkpoint's record; an imported one has no task part",
    ("vit_jax/generate.py", "tokenizer"): "a checkpoint's task record",
    ("vit_jax/data/text/checks.py", "dataset"): "an evaluator's settings",
    ("vit_jax/data/text/checks.py", "hf_holdout"): "a store's manifest, older ones without it",
    ("vit_jax/sweep/collect.py", "branch_from"): "a saved config.json, older ones without the key",
}
# Nested keys whose last part also names a model's, an evaluator's or a file's setting
# (model.name, evals.*.kind, a tokenizer's vocab_size, a file's path): not counted.
AMBIGUOUS_NESTED_NAMES = {"name", "kind", "path", "vocab_size"}


def schema_key_names() -> set[str]:
  """The key names config/defaults.py holds: every key of a text config's defaults (training,
  data, tokenizer), of the evaluator's block only `evals`, and the keys its checks name."""

  def dotted(c, prefix=""):
    for key, value in c.items():
      if hasattr(value, "items") and key != "evals":
        yield from dotted(value, f"{prefix}{key}.")
      else:
        yield prefix + key

  keys = set(dotted(defaults.text_defaults("causal_lm", "tiny")))
  keys |= {
      *defaults.CHOICES,
      *defaults.AT_LEAST,
      *defaults.BELOW_ONE,
      *defaults.BETWEEN_ZERO_AND_ONE,
  }
  names = {key.split(".")[0] for key in keys}
  return names | ({key.split(".")[-1] for key in keys if "." in key} - AMBIGUOUS_NESTED_NAMES)


def reads_with_get(source: str, names: set[str]):
  """(line, key) of each `x.get("key", ...)` in `source` whose key is in `names`."""
  for node in ast.walk(ast.parse(source)):
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in names
    ):
      yield node.lineno, node.args[0].value


def test_reads_with_get_finds_a_repeated_default_and_a_silent_none():
  source = 'a = config.get("log_internals", False)\nb = c.optimizer.get("eps")\nd.get("x", 1)\n'
  assert list(reads_with_get(source, schema_key_names())) == [(1, "log_internals"), (2, "eps")]


def test_config_keys_are_read_without_a_default_of_their_own():
  names = schema_key_names()
  found = []
  for path in module_files().values():
    relative = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8") as f:
      found += [
          f"{relative}:{line}: .get({key!r})"
          for line, key in reads_with_get(f.read(), names)
          if (relative, key) not in NOT_A_CONFIG
      ]
  assert not found, (
      "read config keys as config.KEY (every config holds the keys of config/defaults.py; a "
      f"misspelled one is then an error, not a default): {found}"
  )


def _compares_task_with_a_name(node) -> bool:
  """`x.task == "..."` or `x["task"] != "..."`: a test of a task's kind by its name."""
  if not isinstance(node, ast.Compare):
    return False
  operands = [node.left, *node.comparators]
  names_task = any(
      (isinstance(o, ast.Attribute) and o.attr == "task")
      or (isinstance(o, ast.Subscript) and getattr(o.slice, "value", None) == "task")
      for o in operands
  )
  return names_task and any(
      isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands
  )


def test_no_module_tells_tasks_apart_by_name():
  found = []
  for path in module_files().values():
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    found += [
        f"{os.path.relpath(path, ROOT)}:{n.lineno}"
        for n in ast.walk(tree)
        if _compares_task_with_a_name(n)
    ]
  assert not found, f"read the task's entry (vit_jax/tasks TASKS) instead: {found}"


# Runs vit_jax.main as `python -m` does and writes the vit_jax modules it imported. sys.modules,
# not `-X importtime`: that flag does not log modules loaded by importlib.import_module (the task
# and model registries load theirs so), so it undercounts.
_RUN_AND_LIST_MODULES = """
import atexit, runpy, sys
out = sys.argv[1]
def dump():
  with open(out, "w") as f:
    names = ("vit_jax", "keras", "torch", "datasets")
    f.write("\\n".join(m for m in sys.modules if m.split(".")[0] in names))
atexit.register(dump)
sys.argv = ["vit_jax.main"] + sys.argv[2:]
runpy.run_module("vit_jax.main", run_name="__main__", alter_sys=True)
"""


def _imported_vit_jax_modules(config: str, tmp_path) -> set[str]:
  """The vit_jax modules `python -m vit_jax.main` imports for `config` (and none of Keras's or
  PyTorch's, though both are installed here).

  `total_steps=0` saves the initialized model, evaluates it and stops: by then the run has
  imported every module it will (training/train.py's at its top, the task's and model's on
  building them).
  """
  listing = tmp_path / "modules.txt"
  run = subprocess.run(
      [
          sys.executable,
          "-c",
          _RUN_AND_LIST_MODULES,
          str(listing),
          f"--config={config}",
          f"--workdir={tmp_path / 'w'}",
          "--config.total_steps=0",
      ],
      cwd=ROOT,
      env={**os.environ, "PYTHONPATH": ROOT},
      capture_output=True,
      text=True,
      check=False,
  )
  assert run.returncode == 0, run.stderr[-3000:]
  modules = set(listing.read_text().split())
  # Neither TF's eager import of Keras nor tensorboardX's of PyTorch, which a run never uses:
  # together over 3 s of each start (vit_jax/startup.py, training/metrics_log.py); nor Hugging
  # Face's `datasets` (the data extra), which only a config naming an hf: dataset loads.
  unwanted = {"keras", "torch", "datasets"}
  assert not {m.split(".")[0] for m in modules} & unwanted, sorted(modules)[:20]
  return modules


def test_a_run_imports_what_its_config_needs(tmp_path):
  (tmp_path / "vit").mkdir()
  (tmp_path / "gpt").mkdir()
  vit = _imported_vit_jax_modules("configs/vit.py:runlocal", tmp_path / "vit")
  # 40: the digits config's two evaluators take 3 (vit_jax.evaluate, whose package is their
  # registry, and its base and fewshot modules), a job's ending 1 (training/job_end.py: a
  # preemption notice, a process's end), storage 2 (vit_jax.storage and its retry policy,
  # storage/outages.py, which local checkpoint reads ride out too; its bucket clients and objects
  # load only for a gs:// path) and the trainer 2 (training/setup.py, what the steps run on, which
  # vit_jax.compile builds too, and training/train.py). The model table, the task contract and
  # the evaluators' registry are their packages' __init__ modules.
  assert len(vit) <= 40, sorted(vit)
  needless = {m for m in vit if re.match(r"vit_jax\.(interop|data\.tokenizers|data\.text)", m)}
  assert not needless, f"a ViT run without init_from imports {sorted(needless)}"
  gpt = _imported_vit_jax_modules("configs/gpt.py:runlocal", tmp_path / "gpt")
  # 45: 3 are its evaluator's (evaluate, base, lm), 1 the stream: text form's, 1 the token loss
  # (tasks/token_cross_entropy.py), 1 a job's ending, 2 storage's and 2 the trainer's, as for the
  # ViT; the tokenizer contract is vit_jax/data/tokenizers/__init__.py.
  assert len(gpt) <= 45, sorted(gpt)
  # Readers that only the datasets naming them load (hf: datasets, wds: shards).
  readers = {"vit_jax.data.hub", "vit_jax.data.image.webdataset"}
  assert not {"vit_jax.data.text.masking", "vit_jax.data.image.shapes", *readers} & (vit | gpt)
  bucket_only = {"vit_jax.storage.gcs", "vit_jax.storage.objects"}
  assert not bucket_only & (vit | gpt), "a local run imports the bucket's clients"
  assert "vit_jax.models.vit" not in gpt and not any(m.startswith("vit_jax.interop") for m in gpt)


def _command_name(module: str) -> str:
  return module.removeprefix(f"{PACKAGE}.").removesuffix(".__main__")


def package_commands() -> set[str]:
  """The package's commands as found on disk: top-level modules that run as a program, and
  subpackages with a __main__."""
  names = set()
  for name in os.listdir(os.path.join(ROOT, PACKAGE)):
    path = os.path.join(ROOT, PACKAGE, name)
    if name.endswith(".py"):
      with open(path, encoding="utf-8") as f:
        if re.search(r"^if __name__ == .__main__.:", f.read(), re.M):
          names.add(name[:-3])
    elif os.path.isfile(os.path.join(path, "__main__.py")):
      names.add(name)
  return names


def test_readme_and_startup_list_the_package_commands():
  commands = {_command_name(c) for c in COMMANDS}
  assert package_commands() == commands, "a command was added or removed: update COMMANDS"
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  section = re.search(r"^## Commands\n(.*?)^## ", readme, re.M | re.S)
  assert section, "README.md has no '## Commands' section"
  listed = set(re.findall(r"^\| `vit_jax\.(\w+)` \|", section.group(1), re.M))
  assert listed == commands, f"README.md's command table: {sorted(listed ^ commands)} differ"
  with open(os.path.join(ROOT, PACKAGE, "startup.py"), encoding="utf-8") as f:
    docstring = ast.get_docstring(ast.parse(f.read()))
  named = re.search(r"Every command line \(([^)]*)\)", docstring)
  assert named, "vit_jax/startup.py's docstring no longer lists the commands"
  listed = set(re.split(r",\s*", named.group(1)))
  assert listed == commands, f"vit_jax/startup.py's commands: {sorted(listed ^ commands)} differ"


# The documents a user reads, where each measured figure has one home (docs/results.md for the
# configs' runs, experiments/results/NAME/README.md for a sweep, benchmarks/README.md for speed
# and memory, docs/pod.md for the TPU compile table); config files are read for their docstring.
DOCUMENTS = (
    "README.md",
    "docs/*.md",
    "benchmarks/README.md",
    "experiments/results/*/README.md",
    "configs/*.py",
)
# What counts as a measured figure. A rounded promise ("about 98%", "about 5 min") is not one: a
# config's docstring promises what docs/results.md measures.
FIGURE = re.compile(
    r"(?<![\w.])(?:"
    r"\d+\.\d+%"  # a percentage with decimals: 98.31%
    r"|\d+ min \d+ s\b|\d+(?:\.\d+)? s\b"  # a duration: 5 min 22 s, 49 s
    r"|\d+(?:\.\d+)?x\b"  # a ratio: 0.55x, 78x
    r"|\d+\.\d{3,}\b"  # a value read to three decimals: bits per character 2.666, accuracy 0.345
    r"|\d[\d,]*(?:\.\d+)? (?:MiB|GiB|GFLOP/s|img/s|tok/s|examples/s)\b"  # memory, throughput
    r"|\d{1,3}(?:,\d{3}){2,}"  # a count in the millions: 86,567,656
    r")"
)
# Figures that are facts rather than measurements, so they may be quoted in several documents.
ALLOWED_REPEATS = {
    "86,567,656": "ViT-B/16's published parameter count (1000 classes), pinned by "
    "tests/models/test_param_counts.py",
}


def document_texts() -> dict[str, str]:
  """{path relative to ROOT: its text} of every document in DOCUMENTS (a config: its docstring)."""
  texts = {}
  for pattern in DOCUMENTS:
    for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
      with open(path, encoding="utf-8") as f:
        text = f.read()
      if path.endswith(".py"):
        text = ast.get_docstring(ast.parse(text)) or ""
      texts[os.path.relpath(path, ROOT)] = text
  return texts


def repeated_figures(texts: dict[str, str], allowed=()) -> dict[str, list[str]]:
  """{figure: the documents that write it} for each figure written in more than one document."""
  where = {}
  for path, text in texts.items():
    for figure in FIGURE.findall(re.sub(r"\s+", " ", text)):  # a figure may wrap across lines
      where.setdefault(figure, set()).add(path)
  return {f: sorted(paths) for f, paths in where.items() if len(paths) > 1 and f not in allowed}


def test_repeated_figures_finds_a_figure_copied_into_another_document():
  texts = {
      "docs/results.md": "test accuracy 98.31% in 5 min\n22 s; BERT 1.32x, 2.666 bits",
      "README.md": "reaches about 98% (98.31% measured) in 5 min 22 s",
      "configs/vit.py": "should take about 5 min and reach about 98%; 1.32x; 2.666",
  }
  assert repeated_figures(texts) == {
      "98.31%": ["README.md", "docs/results.md"],
      "5 min 22 s": ["README.md", "docs/results.md"],
      "1.32x": ["configs/vit.py", "docs/results.md"],
      "2.666": ["configs/vit.py", "docs/results.md"],
  }
  assert repeated_figures(texts, allowed={"98.31%", "5 min 22 s", "1.32x", "2.666"}) == {}


def test_each_measured_figure_is_written_in_one_document():
  texts = document_texts()
  assert {"README.md", "docs/results.md", "configs/vit.py"} <= set(texts)
  repeated = repeated_figures(texts, ALLOWED_REPEATS)
  assert not repeated, (
      "a figure is written in several documents; keep it in its home and link there (if two "
      f"different measurements read the same, write one more precisely): {repeated}"
  )
  written = set(FIGURE.findall(re.sub(r"\s+", " ", " ".join(texts.values()))))
  stale = set(ALLOWED_REPEATS) - written
  assert not stale, f"ALLOWED_REPEATS lists figures no document writes: {sorted(stale)}"


def test_every_python_file_named_in_our_text_exists():
  """A `vit_jax/...py` path, or one relative to vit_jax/ or to the naming file's own package
  (`training/health_metrics.py`, `image/pipeline.py`), names a file that exists. Paths into
  other projects (big_vision's `configs/vit_i1k.py`) start with no folder of ours."""
  package = os.path.join(ROOT, "vit_jax")
  path = re.compile(r"(?<![\w/.*-])((?:[A-Za-z_]\w*/)+[A-Za-z_]\w*\.py)\b")
  missing = []
  for name in glob.glob(f"{package}/**/*.py", recursive=True) + glob.glob(f"{ROOT}/configs/*.py"):
    with open(name, encoding="utf-8") as f:
      text = f.read()
    bases = [package, os.path.dirname(name)] if name.startswith(package + os.sep) else []
    for named in set(path.findall(text)):
      if named.startswith("vit_jax/"):
        found = os.path.isfile(os.path.join(ROOT, named))
      else:
        ours = [b for b in bases if os.path.isdir(os.path.join(b, named.split("/")[0]))]
        found = not ours or any(os.path.isfile(os.path.join(b, named)) for b in ours)
      if not found:
        missing.append(f"{os.path.relpath(name, ROOT)}: {named}")
  assert not missing, missing
