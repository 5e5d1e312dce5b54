"""Mutation testing: breaks the code one small edit at a time and runs the tests that should notice.

Each mutant flips one operator or comparison, moves one constant by +1, swaps two call arguments
or drops one statement, in a copy of the repository; the module's targeted tests run against it.
A mutant the tests pass is a *survivor*: a bug the suite would miss. Prints the kill rate per
module and lists the survivors (file:line and the edit).

  .venv/bin/python scripts/mutation.py            # 5 sampled mutants of each module below
  .venv/bin/python scripts/mutation.py --module vit_jax/models/position.py --max_per_module 0
  .venv/bin/python scripts/mutation.py --list     # count the mutants, run nothing

First every targeted test runs once unmutated (a module whose tests fail is skipped; their
durations set each module's timeout), then the mutants run two at a time (--jobs), each in its
own copy of the repository. Tests run in forked children of a process that has already imported
JAX, Flax, optax, TF, torch, timm and transformers (not vit_jax), which saves their import time
per mutant; --no_fork runs a fresh interpreter instead. Measured time: docs/results.md.
"""

import argparse
import ast
import copy
import importlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from xml.etree import ElementTree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTEST = ["-x", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-W", "ignore"]


# ---- Targets: each module mutated, the tests run against its mutants, the code in scope ----
TASK_TESTS = ["tests/tasks/test_losses.py", "tests/tasks/test_eval_sums.py"]
LOSS_SCOPE = (
    "totals",
    "loss",
    "eval_sums",
    "eval_summary",
    "_sums",
    "_nsp_sums",
    "weighted_cross_entropy",
)
PROPERTIES = "tests/models/test_properties.py"
# A save that fails and is tried again, in-process (the file's command-line runs are left out).
SAVE_FAILURES = [
    f"tests/survival/test_save_failures.py::{name}"
    for name in (
        "test_a_forced_save_whose_first_try_fails_is_tried_again",
        "test_a_save_whose_commit_landed_before_its_error_is_not_saved_again",
        "test_a_due_save_that_fails_is_left_to_the_next_one",
        "test_a_forced_save_past_the_budget_is_one_line_and_keeps_the_last_step",
    )
]
# module -> (targeted tests, functions to mutate (None: the whole module)). Each list holds the
# tests that check the module against something independent (formulas, NumPy, timm or Hugging
# Face), fastest first: pytest stops at the first failure (-x), so a killed mutant costs little.
TARGETS = {
    "vit_jax/models/attention.py": (
        [
            "tests/models/test_splash_attention.py::test_auto_picks_the_kernel_of_the_platform",
            "tests/models/test_splash_attention.py::test_splash_leaves_dense_masks_and_keyless_rows_to_xla",
            "tests/models/test_attention.py",
            "tests/models/test_kv_cache.py",
            "tests/perf/test_gpu_speed_choices.py::test_odd_lengths_padded_for_cudnn_attend_as_unpadded",
        ],
        None,
    ),
    "vit_jax/models/chunked_attention.py": (
        ["tests/perf/test_chunked_attention.py", "tests/models/test_attention.py"],
        None,
    ),
    "vit_jax/models/masks.py": (
        [
            "tests/models/test_attention.py",
            PROPERTIES + "::test_causal_gradient_is_exactly_zero_for_future_inputs",
            PROPERTIES + "::test_packed_segments_leak_nothing",
            PROPERTIES + "::test_bert_padding_leaves_real_tokens_unchanged",
        ],
        None,
    ),
    "vit_jax/models/position.py": (
        ["tests/models/test_position.py"],
        None,
    ),
    "vit_jax/models/layers.py": (
        [
            "tests/models/test_layers.py",
            PROPERTIES + "::test_patch_embedding_equals_explicit_patch_matmul",
            "tests/interop/test_timm.py",
        ],
        None,
    ),
    "vit_jax/models/transformer.py": (
        [
            "tests/models/test_transformer.py",
            "tests/models/test_init_and_dropout.py",
            "tests/models/test_block_config.py::test_scanned_layers_compute_the_unrolled_stack",
            PROPERTIES,
            "tests/interop/test_gpt2_hf.py::test_import",
            "tests/interop/test_bert_hf.py::test_import_pretraining",
        ],
        None,
    ),
    "vit_jax/models/vit.py": (
        [
            "tests/models/test_presets.py",
            "tests/models/test_init_and_dropout.py",
            "tests/models/test_param_counts.py",
            "tests/survival/test_bad_model_config.py",
            "tests/models/test_position.py::test_vit_cls_token_gets_no_fixed_embedding",
            PROPERTIES + "::test_patch_embedding_equals_explicit_patch_matmul",
            "tests/interop/test_timm.py",
            "tests/interop/test_vit_hf.py",
        ],
        None,
    ),
    "vit_jax/models/mixer.py": (
        [
            "tests/models/test_mixer.py",
            "tests/models/test_param_counts.py::test_mixer_b16",
            "tests/models/test_presets.py::test_image_classifiers_default_to_imagenet_classes",
            "tests/models/test_presets.py::test_mixer_presets_are_the_published_shapes",
        ],
        None,
    ),
    "vit_jax/models/resnet.py": (
        ["tests/models/test_presets.py", "tests/models/test_resnet.py"],
        None,
    ),
    "vit_jax/models/gpt.py": (
        [
            "tests/models/test_presets.py::test_gpt_presets_and_default_vocabulary_follow_gpt2",
            "tests/models/test_param_counts.py::test_gpt2_small_tied",
            PROPERTIES + "::test_gpt_is_causal_in_its_token_embeddings",
            "tests/models/test_init_and_dropout.py::test_gpt_drops_its_embedded_tokens_in_training_only",
            "tests/interop/test_gpt2_hf.py",
            "tests/models/test_kv_cache.py",
            "tests/models/test_precision.py::test_gpt_backward_multiplies_in_bf16_up_to_the_fp32_logits",
            "tests/perf/test_gpu_speed_choices.py",
        ],
        None,
    ),
    "vit_jax/models/bert.py": (
        [
            "tests/models/test_presets.py::test_bert_presets_follow_turc_et_al",
            "tests/models/test_param_counts.py::test_bert_base_with_pooler",
            PROPERTIES + "::test_bert_padding_leaves_real_tokens_unchanged",
            "tests/interop/test_bert_hf.py",
        ],
        None,
    ),
    "vit_jax/models/seq2seq.py": (
        ["tests/models/test_seq2seq.py", "tests/models/test_kv_cache.py"],
        None,
    ),
    "vit_jax/models/__init__.py": (
        [
            "tests/survival/test_bad_model_config.py",
            "tests/models/test_presets.py",
            "tests/models/test_param_counts.py",
        ],
        None,
    ),
    "vit_jax/training/flops.py": (
        [
            "tests/models/test_param_counts.py",
            "tests/training/test_flops.py::test_gpt_flops_are_palm_formula",
            "tests/training/test_flops.py::test_vit_flops_count_patches_attention_and_a_once_per_image_head",
            "tests/training/test_flops.py::test_bert_mlm_counts_its_tied_output_projection",
        ],
        None,
    ),
    "vit_jax/config/args.py": (["tests/configs/test_args.py"], ("parse", "_convert")),
    "vit_jax/evaluate/base.py": (["tests/evaluate/test_sums.py"], ("add_sums",)),
    "vit_jax/data/text/masking.py": (["tests/data/text/test_masking.py"], None),
    "vit_jax/data/text/batches.py": (["tests/data/text/test_batches.py"], None),
    "vit_jax/tasks/classification.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/text_common.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/token_cross_entropy.py": (
        ["tests/tasks/test_token_cross_entropy.py", *TASK_TESTS],
        None,
    ),
    "vit_jax/tasks/causal_lm.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/masked_lm.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/seq2seq.py": (TASK_TESTS, LOSS_SCOPE),
    "vit_jax/tasks/text_classification.py": (TASK_TESTS, LOSS_SCOPE),
    # The retry and save paths: a bucket's outage ridden out, appends that land once, saves that
    # fail and are tried again, damaged steps read past.
    "vit_jax/storage/outages.py": (
        ["tests/test_storage.py", *SAVE_FAILURES],
        (
            "outage",
            "_unanswered",
            "answers",
            "_answered",
            "ride_out",
            "_pause",
            "client_deadline_s",
            "_longest_wait_s",
            "patiently",
        ),
    ),
    "vit_jax/storage/__init__.py": (["tests/test_storage.py", *SAVE_FAILURES], ("_removing",)),
    "vit_jax/storage/objects.py": (
        ["tests/test_storage.py", *SAVE_FAILURES],
        (
            "flush",
            "_send",
            "_landed",
            "create_object",
            "replace_object",
            "delete_object",
            "read_object",
        ),
    ),
    "vit_jax/checkpoint.py": (
        [
            *SAVE_FAILURES,
            "tests/test_storage.py::test_the_clients_retry_a_request_for_a_quarter_of_the_budget",
            "tests/survival/test_damaged_checkpoint.py",
        ],
        (
            "step_dirs",
            "discard_partial_saves",
            "set_aside",
            "_read_retrying",
            "_everywhere",
            "tensorstore_retries",
            "first_intact",
            "manager",
            "save",
            "_save",
        ),
    ),
    "vit_jax/training/train.py": (
        [
            "tests/training/test_train_step.py",
            "tests/training/test_step_math.py",
            "tests/training/test_health_metrics.py::test_internals_match_the_checkpoints_and_sgds_update",
            "tests/training/test_learning.py::test_loss_falls_by_a_margin[vit-40-0.003-0.2]",
        ],
        ("update_step", "_summed_over_microbatches"),  # the update step, not the loop
    ),
}


# ---- Mutants: one small AST edit each -------------------------------------------------------
SWAP_BINOP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Pow: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
SWAP_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


class Mutator(ast.NodeTransformer):
  """Counts the mutation sites in a module; with `target`, applies the target-th one only."""

  def __init__(self, scope=None, target=None):
    self.scope, self.target = scope, target
    self.sites = []  # (line, description)
    self.functions = []

  def _site(self, node, description):
    """True if this site is the one to mutate; records every eligible site."""
    if self.scope and not any(f in self.scope for f in self.functions):
      return False
    self.sites.append((getattr(node, "lineno", 0), description))
    return len(self.sites) - 1 == self.target

  def _visit_function(self, node):
    self.functions.append(node.name)
    node = self.generic_visit(node)
    self.functions.pop()
    return node

  visit_FunctionDef = visit_AsyncFunctionDef = _visit_function

  def visit_BinOp(self, node):
    self.generic_visit(node)
    new = SWAP_BINOP.get(type(node.op))
    if new and self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
      node.op = new()
    return node

  def visit_Compare(self, node):
    self.generic_visit(node)
    new = SWAP_COMPARE.get(type(node.ops[0]))
    if new and self._site(node, f"{type(node.ops[0]).__name__} -> {new.__name__}"):
      node.ops = [new()] + node.ops[1:]
    return node

  def visit_BoolOp(self, node):
    self.generic_visit(node)
    new = ast.Or if isinstance(node.op, ast.And) else ast.And
    if self._site(node, f"{type(node.op).__name__} -> {new.__name__}"):
      node.op = new()
    return node

  def visit_UnaryOp(self, node):
    self.generic_visit(node)
    if isinstance(node.op, (ast.Not, ast.USub, ast.Invert)) and self._site(
        node, f"drop unary {type(node.op).__name__}"
    ):
      return node.operand
    return node

  def visit_Constant(self, node):
    value = node.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
      if self._site(node, f"constant {value!r} -> {value + 1!r}"):
        return ast.copy_location(ast.Constant(value + 1), node)
    return node

  def visit_Call(self, node):
    self.generic_visit(node)
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    if (
        len(positional) >= 2
        and len(positional) == len(node.args)
        and self._site(node, f"swap the first two arguments of {ast.unparse(node.func)}")
    ):
      node.args = [node.args[1], node.args[0]] + node.args[2:]
    return node

  def _drop(self, node):
    self.generic_visit(node)
    if self.functions and self._site(node, f"drop `{ast.unparse(node).splitlines()[0][:60]}`"):
      return ast.copy_location(ast.Pass(), node)
    return node

  def visit_Expr(self, node):
    if isinstance(node.value, ast.Constant):  # docstrings
      return node
    return self._drop(node)

  visit_Assign = visit_AugAssign = _drop


def mutants(source: str, scope):
  """[(line, description, mutated source)] for every site of `source`."""
  tree = ast.parse(source)
  counter = Mutator(scope)
  counter.visit(copy.deepcopy(tree))
  out = []
  for index, (line, description) in enumerate(counter.sites):
    mutated = Mutator(scope, target=index).visit(copy.deepcopy(tree))
    out.append((line, description, ast.unparse(ast.fix_missing_locations(mutated))))
  return out


# ---- Running --------------------------------------------------------------------------------


def copy_repository(destination: str) -> None:
  ignore = shutil.ignore_patterns(".git", "__pycache__", ".venv", "workdirs", "*.egg-info")
  for name in ("vit_jax", "tests", "configs", "scripts"):
    shutil.copytree(os.path.join(ROOT, name), os.path.join(destination, name), ignore=ignore)
  shutil.copy(os.path.join(ROOT, "pytest.ini"), destination)


class Slot:
  """One copy of the repository and the test process running in it (at most one at a time)."""

  def __init__(self, copy_dir: str, fork: bool):
    self.copy_dir, self.fork = copy_dir, fork
    self.task = self.handle = None
    self.restore = None  # (path, original source) of the file the running task changed

  def start(self, task, args, source_path=None, original=None, mutated=None) -> None:
    """Writes the mutant (if any) into the copy and starts pytest with `args` there."""
    self.task, self.started = task, time.time()
    self.restore = None
    if source_path is not None:
      path = os.path.join(self.copy_dir, source_path)
      with open(path, "w", encoding="utf-8") as f:
        f.write(mutated)
      self.restore = (path, original)
    if not self.fork:
      env = dict(
          os.environ,
          PYTHONPATH=self.copy_dir,
          TF_CPP_MIN_LOG_LEVEL="3",
          PYTHONDONTWRITEBYTECODE="1",
      )
      self.handle = subprocess.Popen(
          [sys.executable, "-m", "pytest", *args],
          cwd=self.copy_dir,
          env=env,
          stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL,
      )
      return
    pid = os.fork()
    if pid == 0:  # child: import vit_jax from the copy, run pytest, report by exit code
      os.chdir(self.copy_dir)
      sys.path.insert(0, self.copy_dir)
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, 1)
      os.dup2(devnull, 2)
      import pytest  # pylint: disable=g-import-not-at-top

      os._exit(int(pytest.main(args)))
    self.handle = pid

  def poll(self, timeout: float):
    """None while running; else 'pass', 'fail' or 'timeout', with the copy restored."""
    if self.fork:
      done, status = os.waitpid(self.handle, os.WNOHANG)
      code = os.waitstatus_to_exitcode(status) if done else None
    else:
      code = self.handle.poll()
    if code is None:
      if time.time() - self.started < timeout:
        return None
      if self.fork:
        os.kill(self.handle, signal.SIGKILL)
        os.waitpid(self.handle, 0)
      else:
        self.handle.kill()
        self.handle.wait()
      outcome = "timeout"
    else:
      outcome = "pass" if code == 0 else "fail"
    if self.restore is not None:
      path, original = self.restore
      with open(path, "w", encoding="utf-8") as f:
        f.write(original)
    self.task = self.handle = self.restore = None
    return outcome


def run_all(slots, tasks, timeout_of, on_done) -> None:
  """Runs `tasks` [(key, pytest args, module, original, mutated)] on the free slots until all are
  done; a task with module None runs the copy as it is."""
  pending = list(tasks)
  while pending or any(s.task is not None for s in slots):
    for slot in slots:
      if slot.task is None and pending:
        key, *task = pending.pop(0)
        slot.start(key, *task)
    time.sleep(0.05)
    for slot in slots:
      if slot.task is not None:
        key, elapsed = slot.task, time.time() - slot.started
        outcome = slot.poll(timeout_of(key))
        if outcome is not None:
          on_done(key, outcome, elapsed)


def selects(spec: str, nodeid: str) -> bool:
  """Whether the pytest argument `spec` (a file, or file::test) selects the test `nodeid`."""
  return nodeid.split("[")[0] == spec or nodeid.split("::")[0] == spec


def baseline(slots, test_lists, scratch):
  """({test id: seconds}, {failed test ids}) of one unmutated run of every targeted test."""
  union = sorted({spec for tests in test_lists for spec in tests})
  files = {spec for spec in union if "::" not in spec}
  union = [spec for spec in union if "::" not in spec or spec.split("::")[0] not in files]
  chunks = [union[i :: len(slots)] for i in range(len(slots))]
  reports = [os.path.join(scratch, f"baseline_{i}.xml") for i in range(len(chunks))]
  options = [arg for arg in PYTEST if arg != "-x"]  # every test, not up to the first failure
  tasks = [
      (i, options + [f"--junitxml={reports[i]}"] + chunk) for i, chunk in enumerate(chunks) if chunk
  ]
  run_all(slots, tasks, lambda _: 3600.0, lambda *_: None)
  durations, failed = {}, set()
  for report in reports:
    if not os.path.exists(report):
      continue
    for case in ElementTree.parse(report).iter("testcase"):
      path = case.get("classname", "").replace(".", "/")
      nodeid = f"{path}.py::{case.get('name')}"
      durations[nodeid] = float(case.get("time", 0.0))
      if case.find("failure") is not None or case.find("error") is not None:
        failed.add(nodeid)
  return durations, failed


def preload() -> None:
  """Imports the heavy libraries once, in the parent, so forked children start warm."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  # In this order: torchvision segfaults when TensorFlow is already loaded (tests/conftest.py
  # imports it first too). A list, so an import sorter cannot reorder it.
  for name in (
      "torchvision",
      "timm",
      "transformers.models.gpt2.modeling_gpt2",  # transformers imports its models lazily
      "transformers.models.bert.modeling_bert",
      "transformers.models.vit.modeling_vit",
      "flax.linen",
      "jax",
      "optax",
      "orbax.checkpoint",
      "pytest",
      "tensorflow",
      "tensorflow_datasets",
  ):
    importlib.import_module(name)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--module", action="append", help="only these modules (repeatable)")
  parser.add_argument(
      "--max_per_module",
      type=int,
      default=5,
      help="mutants sampled per module (seeded); 0 runs them all",
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--list", action="store_true", help="count the mutants and stop")
  parser.add_argument("--no_fork", action="store_true", help="a fresh interpreter per mutant")
  parser.add_argument(
      "--jobs", type=int, default=2, help="mutants tested at once, each in its own copy"
  )
  args = parser.parse_args(argv)
  modules = args.module or list(TARGETS)
  unknown = [m for m in modules if m not in TARGETS]
  if unknown:
    print(
        f"error: no targeted tests for {unknown}; choose from {list(TARGETS)}.",
        file=sys.stderr,
    )
    return 2

  plans = {}
  for module in modules:
    tests, scope = TARGETS[module]
    with open(os.path.join(ROOT, module), encoding="utf-8") as f:
      source = f.read()
    found = mutants(source, scope)
    # A seeded shuffle, so a smaller --max_per_module runs a subset of a larger one's mutants.
    order = list(range(len(found)))
    random.Random(args.seed).shuffle(order)
    chosen = [found[i] for i in sorted(order[: args.max_per_module or len(found)])]
    plans[module] = (tests, source, found, chosen)
    print(f"{module}: {len(found)} mutants, running {len(chosen)}", flush=True)
  if args.list:
    return 0

  fork = not args.no_fork
  if fork:
    preload()
  # Two mutants of one file can have equal sizes and be written within the same second, which a
  # cached .pyc (keyed on size and mtime) cannot tell apart: compile every module afresh.
  sys.dont_write_bytecode = True
  started = time.time()
  with tempfile.TemporaryDirectory(prefix="mutation_") as scratch:
    slots = []
    for index in range(max(args.jobs, 1)):
      copy_dir = os.path.join(scratch, str(index))
      copy_repository(copy_dir)
      slots.append(Slot(copy_dir, fork))

    # Every targeted test runs once, unmutated, in one pass over their union (split over the
    # slots): a module whose tests fail there is skipped, and its tests' durations set the
    # timeout of its mutants.
    durations, failed = baseline(slots, [tests for tests, *_ in plans.values()], scratch)
    timeouts = {}
    for module, (tests, *_) in plans.items():
      ran = [n for n in durations if any(selects(spec, n) for spec in tests)]
      broken = [n for n in ran if n in failed]
      if broken or not ran:
        reason = f"{broken[0]} fails" if broken else "no test ran"
        print(f"{module}: skipped, its targeted tests do not pass unmutated ({reason}).")
        continue
      seconds = sum(durations[n] for n in ran)
      timeouts[module] = max(60.0, 3 * seconds + 20)
      print(f"{module}: {len(ran)} targeted tests pass unmutated ({seconds:.0f} s)", flush=True)

    results = {m: [] for m in timeouts}
    tasks = []
    for module in timeouts:
      tests, source, _, chosen = plans[module]
      for line, description, mutated in chosen:
        args = PYTEST + list(tests)
        tasks.append(((module, line, description), args, module, source, mutated))

    def mutant_done(key, outcome, elapsed):
      module, line, description = key
      results[module].append((line, description, outcome))
      verdict = "SURVIVED" if outcome == "pass" else outcome
      print(f"  {module}:{line} {description}: {verdict} ({elapsed:.0f} s)", flush=True)

    run_all(slots, tasks, lambda key: timeouts[key[0]], mutant_done)

  print(f"\nKill rate per module ({(time.time() - started) / 60:.1f} min):")
  survivors = []
  for module, outcomes in results.items():
    outcomes.sort()
    killed = sum(o != "pass" for _, _, o in outcomes)
    print(f"  {module:42s} {killed:3d}/{len(outcomes):3d}  {killed / max(len(outcomes), 1):6.1%}")
    survivors += [f"{module}:{line}  {d}" for line, d, o in outcomes if o == "pass"]
  print(f"\nSurvivors ({len(survivors)}):")
  for s in survivors:
    print("  " + s)
  return 0


if __name__ == "__main__":
  sys.exit(main())
