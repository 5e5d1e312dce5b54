"""Checks on the code itself: no import cycles among vit_jax modules, and no overlong files."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "vit_jax"
MAX_LINES = 400
CHECKED_DIRS = ("vit_jax", "configs", "benchmarks", "scripts", "experiments", "tests")

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
  assert "vit_jax.runtime" in graph["vit_jax.data.image"]
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


def test_no_file_over_max_lines():
  too_long = []
  for directory in CHECKED_DIRS:
    for folder, _, files in os.walk(os.path.join(ROOT, directory)):
      for name in files:
        if name.endswith(".py"):
          path = os.path.join(folder, name)
          with open(path, encoding="utf-8") as f:
            count = sum(1 for _ in f)
          if count > MAX_LINES:
            too_long.append(f"{os.path.relpath(path, ROOT)}: {count} lines")
  assert not too_long, f"files over {MAX_LINES} lines (split them by job): {too_long}"
