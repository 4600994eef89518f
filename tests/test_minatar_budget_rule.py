"""tools/minatar_budget_report.py's `choose`: docs/minatar_budget.md's rule (committed before
its runs) on hand-made counts, each case worked out from the page's wording."""
import pytest

from tools import minatar_budget_report as tool


def _cells(reached_1pct, reached_5pct, ratio=1.0):
  """Ten cells (five games per data kind) of which the first n of each kind reach."""
  return ([dict(dataset="1%", reached=i < reached_1pct, ratio=ratio) for i in range(5)]
          + [dict(dataset="5%", reached=i < reached_5pct, ratio=ratio) for i in range(5)])


def _table(bc, cql):
  """bc / cql: {(lr, steps): (reached 1%, reached 5%[, mean ratio])}."""
  out = {}
  for learner, counts in (("BC", bc), ("CQL", cql)):
    for (lr, steps), c in counts.items():
      out[(learner, lr, steps)] = _cells(*c)
  return out


LOW, HIGH = 2.5e-4, 1e-3


def test_the_smallest_budget_that_qualifies_at_either_rate_and_its_rate():
  # BC at 1e-3 reaches 6 at 5k but 5 at 10k (no); at 2.5e-4: 4, 6, 7 -> 10k qualifies (6, 7).
  bc = {(LOW, 5000): (2, 2), (LOW, 10000): (3, 3), (LOW, 20000): (3, 4),
        (HIGH, 5000): (3, 3), (HIGH, 10000): (2, 3), (HIGH, 20000): (4, 4)}
  # CQL at 10k: 2.5e-4 reaches 7, 1e-3 reaches 5.
  cql = {(LOW, s): (3, 4) for s in (5000, 10000, 20000)}
  cql.update({(HIGH, s): (2, 3) for s in (5000, 10000, 20000)})
  c = tool.choose(_table(bc, cql))
  assert (c["budget"], c["bc_lr"], c["cql_lr"], c["qualified"]) == (10000, LOW, LOW, True)
  assert not c["one_pct_too_small"]


def test_both_rates_qualify_at_the_budget_then_the_one_reaching_more_cells():
  bc = {(LOW, 5000): (3, 3), (LOW, 10000): (3, 4), (HIGH, 5000): (3, 4), (HIGH, 10000): (3, 3)}
  cql = {(LOW, 5000): (1, 1), (LOW, 10000): (1, 1), (HIGH, 5000): (4, 4), (HIGH, 10000): (4, 4)}
  c = tool.choose(_table(bc, cql))
  assert (c["budget"], c["bc_lr"], c["cql_lr"]) == (5000, HIGH, HIGH)


def test_the_last_budget_cannot_qualify_alone_and_nothing_qualifies():
  # BC reaches 6 only at the last budget: no budget qualifies; the budget is where BC reaches
  # the most cells (the last), and the page reports the shortfall.
  bc = {(LOW, 5000): (1, 2), (LOW, 10000): (2, 2), (LOW, 20000): (3, 3),
        (HIGH, 5000): (1, 1), (HIGH, 10000): (1, 1), (HIGH, 20000): (2, 2)}
  # CQL ties on cells at 20k (5 each): the higher mean score / behaviour ratio wins.
  cql = {(LOW, 20000): (2, 3, 0.9), (HIGH, 20000): (3, 2, 1.1)}
  cql.update({(lr, s): (0, 0) for lr in (LOW, HIGH) for s in (5000, 10000)})
  c = tool.choose(_table(bc, cql))
  assert (c["budget"], c["bc_lr"], c["cql_lr"], c["qualified"]) == (20000, LOW, HIGH, False)


def test_ties_go_to_the_smaller_budget_then_the_suites_rate():
  bc = {(LOW, 5000): (2, 2), (LOW, 10000): (2, 2), (HIGH, 5000): (2, 2), (HIGH, 10000): (1, 1)}
  cql = {(lr, s): (1, 1) for lr in (LOW, HIGH) for s in (5000, 10000)}
  c = tool.choose(_table(bc, cql))
  assert (c["budget"], c["bc_lr"], c["qualified"]) == (5000, LOW, False)


@pytest.mark.parametrize("one_pct,expected", [((1, 1), True), ((2, 0), False)])
def test_one_percent_too_small_when_bc_reaches_at_most_one_of_its_cells_at_both_rates(
    one_pct, expected):
  # At the budget BC reaches 3 "5%" cells at its rate; "1%": one_pct[i] cells at rate i.
  bc = {(LOW, 5000): (one_pct[0], 3), (LOW, 10000): (one_pct[0], 3),
        (HIGH, 5000): (one_pct[1], 0), (HIGH, 10000): (one_pct[1], 0)}
  cql = {(lr, s): (1, 1) for lr in (LOW, HIGH) for s in (5000, 10000)}
  c = tool.choose(_table(bc, cql))
  assert c["budget"] == 5000 and c["one_pct_too_small"] is expected
