"""experiments/budget_compare.py: a sweep's cost is what its runs trained themselves, and the two
sweeps must hold the same runs."""

import pytest

from experiments import budget_compare
from vit_jax import errors


def row(run, flops, final, own=None, branched_at=0):
  return {
      "run": run,
      "model": "m",
      "flops": flops,
      "final_error": final,
      "own_flops": own,
      "branched_at": branched_at,
  }


def test_the_cost_counts_each_branch_from_its_branch_point():
  per_budget = [row("s100", 1e9, 0.5, own=1e9), row("s400", 4e9, 0.4, own=4e9)]
  branches = [row("s400", 4e9, 0.41, own=4e9), row("s100", 1e9, 0.49, own=0.2e9, branched_at=80)]
  result = budget_compare.compare(per_budget, branches, "error")
  assert result["cost_flops"] == {"per_budget": 5e9, "branches": 4.2e9}
  assert result["cost_ratio"] == pytest.approx(0.84)
  assert result["runs"]["s100"] == {
      "model": "m",
      "flops": 1e9,
      "per_budget": 0.5,
      "branch": 0.49,
      "branched_at": 80,
  }


def test_sweeps_of_other_runs_are_refused():
  with pytest.raises(errors.DataError, match="the sweeps' runs differ"):
    budget_compare.compare([row("a", 1, 0.5)], [row("b", 1, 0.5)], "error")
