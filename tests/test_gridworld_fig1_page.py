"""docs/results/gridworld.md's section on the layout fig1: every table and number it quotes
recomputed from the committed per-dataset rows (docs/gridworld_fig1_*.csv), the report's
helpers on values derived by hand, and a few rows recomputed from the exact solvers."""
import os

import numpy as np
import pytest

from ccvl_tf.algorithm import belief
from ccvl_tf.experiments.gridworld import family as family_lib
from ccvl_tf.experiments.gridworld import fig1_report as rep
from ccvl_tf.tabular import dataset as dataset_lib
from ccvl_tf.tabular import evaluation as ev_lib
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi
from ccvl_tf.tabular.gridworld import DATA_SLIP_PROB, EVAL_SLIP_PROB, GridWorld, layout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READINGS = ("bonus", "logsumexp+monotone")


def _doc(*parts):
  return os.path.join(ROOT, "docs", *parts)


@pytest.fixture(scope="module")
def rows():
  return dict(sweep=rep.read_rows(_doc("gridworld_fig1_rows.csv")),
              oracle=rep.read_rows(_doc("gridworld_fig1_oracle.csv")),
              routes=rep.read_rows(_doc("gridworld_fig1_routes.csv")),
              adapt=rep.read_rows(_doc("gridworld_fig1_delta_adaptation.csv")))


@pytest.fixture(scope="module")
def page():
  with open(_doc("results", "gridworld.md"), encoding="utf-8") as f:
    return f.read()


def _flat(text):
  return " ".join(text.split())


def test_mean_ci_by_hand():
  assert rep.mean_ci([0.4] * 10) == pytest.approx((0.4, 0.4, 0.4))
  # Two values 0 and 1: a resample's mean is 0 (w.p. 1/4), 0.5 (1/2) or 1 (1/4), so with 2,000
  # resamples the 2.5% and 97.5% percentiles are 0 and 1.
  assert rep.mean_ci([0.0, 1.0]) == pytest.approx((0.5, 0.0, 1.0))


def test_exact_ccvl_scores_by_hand():
  oracle = [dict(method="CCVL", reading="bonus", alpha="0.2", seed="3", delta=d, normalized_return=v)
            for d, v in (("0.05", "0.1"), ("0.95", "0.9"))]
  routes = [dict(reading="bonus", alpha="0.2", seed="3", episode=str(e), delta=d, route="x")
            for e, d in ((1, "0.05"), (2, "0.95"), (3, "0.95"), (4, "0.95"))]
  # Episodes acted with 0.05 once and 0.95 three times: (0.1 + 3 * 0.9) / 4 = 0.7.
  assert rep.exact_ccvl_scores(oracle, routes) == {("bonus", 0.2, 3): pytest.approx(0.7)}


def test_rows_shape(rows):
  # 7 alphas x 10 datasets: CQL, CCVL-bonus, and CCVL, Fixed-CCVL per reading.
  assert len(rows["sweep"]) == 7 * 10 * (2 + 2 * len(READINGS))
  assert len(rows["oracle"]) == 7 * 10 * (1 + 10 * len(READINGS))
  assert len(rows["routes"]) == 7 * 10 * 10 * len(READINGS)
  assert {int(r["seed"]) for r in rows["sweep"]} == set(range(10))


def test_page_tables_are_the_rows(rows, page):
  lines = (rep.sweep_table(rows["sweep"], rows["oracle"], rows["routes"], READINGS)
           + rep.oracle_table(rows["oracle"], rows["routes"], READINGS)
           + rep.per_dataset_table(rows["sweep"], rows["oracle"], rows["routes"], "bonus", 0.2)
           + rep.per_dataset_table(rows["sweep"], rows["oracle"], rows["routes"], "bonus", 1.0))
  for line in lines:
    assert line in page, line


def test_page_numbers_are_the_rows(rows, page):
  text = _flat(page)
  fmt = lambda xs: ", ".join(f"{x:.2f}" for x in xs)
  assert fmt(rep.delta_per_episode(rows["adapt"], "bonus")) in text
  assert rep.delta_per_episode(rows["adapt"], "bonus") == rep.delta_per_episode(
      rows["routes"], "bonus", 0.2)
  assert fmt(rep.delta_per_episode(rows["routes"], "bonus", 1.0)) in text
  at2 = rep.delta_per_episode(rows["routes"], "bonus", 2.0)
  assert f"{at2[0]:.2f} to {at2[-1]:.2f}" in text
  reach = rep.belief_reach(rows["oracle"], rows["routes"], "bonus")
  assert all(reach[a][0] == 8 for a in (0.05, 0.1, 0.2, 0.5, 1.0, 2.0))
  assert (f"{reach[0.2][1]:.2f} at alpha 0.2, {reach[0.5][1]:.2f} at alpha 0.5 and 1 and "
          f"{reach[2.0][1]:.2f} at alpha 2") in text and f"{reach[1.0][1]:.2f}" == "1.00"
  assert ", ".join(f"{reach[a][2]:.2f}" for a in (0.2, 0.5, 1.0)) + f" and {reach[2.0][2]:.2f}" \
      in text
  cql = rep.cql_routes(rows["oracle"])
  assert all(cql[a] == {"long": 10} for a in (0.05, 0.1, 0.2))
  assert cql[0.5] == {"long": 8, "short": 2} and cql[1.0] == cql[2.0] == {"short": 10}


def test_rows_recomputed_from_the_solvers(rows):
  """CQL at alpha 0.2 and the bonus family's oracle rows on dataset 2 (where no member takes
  the short route) recomputed from the exact solvers."""
  data_env = GridWorld(slip_prob=DATA_SLIP_PROB, layout=layout("fig1"))
  eval_env = GridWorld(slip_prob=EVAL_SLIP_PROB, layout=layout("fig1"))
  v_opt = ev_lib.optimal_return(eval_env)
  grid = belief.delta_grid(10)
  data = dataset_lib.make_gridworld_dataset(2, 2500, data_env)
  model = learners.empirical_model(data, data_env.num_states, data_env.num_actions)
  q_cql = learners.cql_q(model, data_env.gamma, 0.2)
  cql_row = next(r for r in rows["oracle"] if r["method"] == "CQL" and r["seed"] == "2"
                 and float(r["alpha"]) == 0.2)
  assert float(cql_row["normalized_return"]) == pytest.approx(
      ev_lib.expected_return(eval_env, q_cql) / v_opt, abs=1e-6)
  assert cql_row["route"] == data_env.route_name(vi.greedy_policy(q_cql)) == "long"
  q = family_lib.exact_family(model, data_env.gamma, 0.2, grid, "bonus")
  members = [r for r in rows["oracle"] if r["method"] == "CCVL" and r["reading"] == "bonus"
             and r["seed"] == "2" and float(r["alpha"]) == 0.2]
  assert len(members) == 10
  for k, r in enumerate(members):
    assert float(r["delta"]) == pytest.approx(grid[k])
    assert float(r["normalized_return"]) == pytest.approx(
        ev_lib.expected_return(eval_env, q[k]) / v_opt, abs=1e-6)
    path = data_env.route_cells(vi.greedy_policy(q[k]))
    # Every member's no-slip route steps from (6, 5) into the lava at (7, 5).
    assert r["route"] == "other" and [data_env.cell(s) for s in path[-2:]] == [(6, 5), (7, 5)]


def test_results_index_cells_are_the_rows(rows):
  """The fig1 table of docs/results/README.md: each cell is the page table's cell of that
  method and alpha (CCVL's rows: scored exactly)."""
  table = rep.sweep_table(rows["sweep"], rows["oracle"], rows["routes"], READINGS)
  alphas = [h.strip() for h in table[0].strip("|").split("|")[1:]]
  cells = {r.strip("|").split("|")[0].strip(): dict(zip(alphas, [c.strip() for c in
                                                              r.strip("|").split("|")[1:]]))
           for r in table[2:]}
  with open(_doc("results", "README.md"), encoding="utf-8") as f:
    text = f.read()
  for label, source in (("CQL", "CQL"),
                        ("CCVL (adaptive; reading `bonus`)", "CCVL [bonus], scored exactly"),
                        ("Fixed-CCVL (reading `bonus`)", "Fixed-CCVL [bonus]"),
                        ("CCVL (adaptive; reading `logsumexp+monotone`)",
                         "CCVL [logsumexp+monotone], scored exactly")):
    expected = f"| {label} | " + " | ".join(cells[source][f"alpha={a}"] for a in ("0.2", "0.5", "1"))
    assert expected in text, expected


def test_neural_table_and_ccvl_bonus_numbers(page):
  neural = rep.read_rows(_doc("gridworld_fig1_neural.csv"))
  assert len(neural) == 2 * 5 * 10
  for line in rep.neural_table(neural):
    assert line in page, line
  sweep = rep.read_rows(_doc("gridworld_fig1_rows.csv"))
  bonus = {(int(r["seed"]), float(r["alpha"])): float(r["normalized_return"])
           for r in sweep if r["method"] == "CCVL-bonus"}
  at8 = [v for (s, a), v in bonus.items() if s == 8 and a >= 0.1]
  at2 = [v for (s, a), v in bonus.items() if s == 2 and a >= 0.2]
  text = _flat(page)
  assert f"on dataset 8, where the `bonus` family walks into the lava, it scores " \
         f"{min(at8):.3f}-{max(at8):.3f} at alpha >= 0.1" in text
  assert max(at2) == 0.0 and "on dataset 2 it scores 0.000 at alpha >= 0.2" in text
