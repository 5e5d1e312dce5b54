"""The mutation operators of scripts/mutation.py: one small AST edit per mutant."""

import ast
import copy

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
