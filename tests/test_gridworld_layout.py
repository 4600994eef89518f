"""The layout rule of docs/gridworld_layout.md: its candidates, its counts and its checks on
small grids with values derived by hand, and the search's committed rows recomputed."""
import csv
import os

import numpy as np
import pytest

from ccvl_tf.experiments.gridworld import layout_search as ls
from ccvl_tf.tabular import dataset as dataset_lib
from ccvl_tf.tabular import learners
from ccvl_tf.tabular import value_iteration as vi
from ccvl_tf.tabular.gridworld import LAYOUT, LAYOUTS, GridWorld, layout

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEARCH_CSV = os.path.join(ROOT, "docs", "gridworld_layout_search.csv")


def test_layout_names():
  assert layout("long_favoured") == LAYOUT
  with pytest.raises(ValueError, match="layout must be one of"):
    layout("nope")


def test_candidates_count_and_order():
  cands = ls.candidates()
  # 2^8 - 1 flank patterns with at least one lava cell, times 3 wall blocks.
  assert len(cands) == 255 * 3 == len(set(cands))
  assert cands[0] == LAYOUTS["long_favoured"]
  dist = [ls.distance(c, LAYOUT) for c in cands]
  assert dist == sorted(dist)
  # Distance 1: one of the 8 lava cells turned to wall (the block unchanged): 8 candidates.
  assert dist.count(1) == 8 and dist[1:9] == [1] * 8
  # The largest distance: every flank cell a wall but one (7 changes) and the block down to
  # row 4 (8 cells opened): 15.
  assert max(dist) == 15
  for c in cands:
    flat = "".join(c)
    assert flat.count("S") == flat.count("G") == 1 and "L" in flat and len(c) == 8


def test_candidate_layout_by_hand():
  rows = ls.candidate_layout("L#######", 4)
  assert rows == ("........", "........", "........", "........", "..####..", ".#L####.",
                  "S......G", ".######.")
  assert ls.distance(rows, LAYOUT) == 7 + 8


def test_goal_arrivals_by_hand():
  # Goal 9, entry cell 5: arrivals from 5 (twice), from 8 (once); 5 -> 4 is not an arrival.
  data = dataset_lib.Transitions(state=np.array([5, 8, 5, 5, 1]),
                                 action=np.zeros(5, np.int64), reward=np.array([1, 1, 1, 0, 0.]),
                                 next_state=np.array([9, 9, 9, 4, 2]),
                                 terminal=np.array([1, 1, 1, 0, 0.]))
  assert ls.goal_arrivals(data, goal=9, entry=5) == (2, 1)


# A 3 x 3 grid with two routes from S (1, 0) to G (1, 2): the short one through (1, 1), beside
# the lava at (2, 1); the long one over the top row (0, 0) -> (0, 1) -> (0, 2).
TINY = ("...",
        "S.G",
        ".L.")


def test_tiny_grid_routes_by_hand():
  env = GridWorld(slip_prob=0.0, layout=TINY)
  right, up, down = 1, 0, 2
  short = np.full(9, right)
  long_ = np.full(9, right)
  long_[env.state(1, 0)] = up
  long_[env.state(0, 2)] = down
  assert env.route_name(short) == "short" and env.route_name(long_) == "long"
  # Deterministic moves: reward 1 on the 2nd step (short) or the 4th (long): gamma^1, gamma^3.
  g = env.gamma
  assert vi.policy_evaluation(env.P, env.R, g, short)[env.start_state] == pytest.approx(g)
  assert vi.policy_evaluation(env.P, env.R, g, long_)[env.start_state] == pytest.approx(g ** 3)


def test_tiny_grid_short_route_value_with_slip_by_hand():
  # p = 0.3, the short route's policy (always right). From (1, 1): G w.p. 0.7, lava w.p. 0.1,
  # up to (0, 1) w.p. 0.1, back to S w.p. 0.1. From (0, 1) moving right: (0, 2) w.p. 0.7,
  # stays (off the top) w.p. 0.1, down to (1, 1) w.p. 0.1, left (0, 0) w.p. 0.1; and so on.
  # Solved here as the linear system read off that description, cell by cell.
  p, g = 0.3, 0.95
  env = GridWorld(slip_prob=p, layout=TINY)
  cells = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 2)]  # the open, non-terminal cells
  idx = {c: i for i, c in enumerate(cells)}
  a_mat, b = np.eye(len(cells)), np.zeros(len(cells))
  for (r, c) in cells:
    for (dr, dc), prob in (((0, 1), 1 - p), ((-1, 0), p / 3), ((1, 0), p / 3), ((0, -1), p / 3)):
      nr, nc = r + dr, c + dc
      if not (0 <= nr < 3 and 0 <= nc < 3):
        nr, nc = r, c
      if (nr, nc) == (1, 2):
        b[idx[(r, c)]] += prob                          # reward 1 on arrival, episode ends
      elif (nr, nc) != (2, 1):                          # lava: value 0
        a_mat[idx[(r, c)], idx[(nr, nc)]] -= g * prob
  v = np.linalg.solve(a_mat, b)
  got = vi.policy_evaluation(env.P, env.R, g, np.full(9, 1))
  assert got[env.start_state] == pytest.approx(v[idx[(1, 0)]], abs=1e-12)


def test_empirical_optimal_policy_on_hand_data():
  # One dataset on TINY (slip 0): from S the data went right to (1, 1) and on to G twice; it
  # went up once and then stopped. The empirical model has no penalty: Q(S, right) = gamma.
  env = GridWorld(slip_prob=0.0, layout=TINY)
  s, m, top, goal = env.state(1, 0), env.state(1, 1), env.state(0, 0), env.goal_state
  data = dataset_lib.Transitions(
      state=np.array([s, m, s, m, s]), action=np.array([1, 1, 1, 1, 0]),
      reward=np.array([0, 1, 0, 1, 0.]), next_state=np.array([m, goal, m, goal, top]),
      terminal=np.array([0, 1, 0, 1, 0.]))
  model = learners.empirical_model(data, env.num_states, env.num_actions)
  pol = ls.empirical_optimal_policy(model, env.gamma)
  assert pol[s] == 1 and pol[m] == 1
  assert env.route_name(pol) == "short"


def _search_rows():
  with open(SEARCH_CSV) as f:
    return list(csv.DictReader(f))


def _per_alpha(field):
  return {float(a): float(x) for a, x in (kv.split(":") for kv in field.split(";"))}


def _passes(row, gated_alphas, n=20, majority=11):
  """The rule's verdict recomputed from a committed row: (0), (i), (iii), and (ii) at
  `gated_alphas` (CQL's long-route count >= majority and mean normalized return < 0.9)."""
  if row["eval_route"] != "short" or not int(row["arrivals_short"]) < int(row["arrivals_other"]):
    return False
  if not round(float(row["empirical_short_share"]) * n) >= majority:
    return False
  if not row["cql_long_share"]:
    return False
  share, score = _per_alpha(row["cql_long_share"]), _per_alpha(row["cql_normalized_mean"])
  return all(round(share[a] * n) >= majority and score[a] < 0.9 for a in gated_alphas)


def test_committed_search_verdicts():
  rows = _search_rows()
  assert len(rows) == 765
  assert [r["layout"] for r in rows] == ["/".join(c) for c in ls.candidates()]
  # The first rule (alpha 0.2, 0.5, 1, 2 gated): no candidate passes, as the rows say.
  assert not any(_passes(r, ls.CQL_ALPHAS) for r in rows)
  assert all(r["passes"] == "False" for r in rows)
  # The second rule (alpha 0.2 and 0.5 gated): the first that passes is candidate 19, 'fig1'.
  first = next(r for r in rows if _passes(r, (0.2, 0.5)))
  assert first["order"] == "19" and first["layout"] == "/".join(LAYOUTS["fig1"])


def test_fig1_premise_recomputed():
  row = _search_rows()[19]
  res = ls.check_premise(LAYOUTS["fig1"])
  for key in ("v_opt_eval", "v_opt_data", "v_eval_policy_at_data", "v_data_policy_at_eval",
              "data_policy_normalized_eval", "empirical_short_share"):
    assert res[key] == pytest.approx(float(row[key]), abs=1e-6), key
  assert (res["arrivals_short"], res["arrivals_other"]) == (180, 575)
  assert res["eval_route"] == res["data_route"] == "short"
  assert res["check0"] and res["check_i"] and res["check_iii"] and not res["check_ii"]
  # (ii) at alpha 0.2 and 0.5 (the second rule), not at 1 and 2 (the first rule's failure).
  assert res["cql_long_share"] == pytest.approx({0.2: 0.95, 0.5: 0.8, 1.0: 0.3, 2.0: 0.0})
  assert res["cql_normalized_mean"][0.2] < 0.9 and res["cql_normalized_mean"][0.5] < 0.9
  assert res["cql_normalized_mean"][2.0] > 0.9
  for a, x in _per_alpha(row["cql_normalized_mean"]).items():
    assert res["cql_normalized_mean"][a] == pytest.approx(x, abs=1e-4)


def test_first_search_numbers_quoted_in_the_rule_doc():
  """The counts and ranges docs/gridworld_layout.md quotes for the first search."""
  rows = _search_rows()
  with open(os.path.join(ROOT, "docs", "gridworld_layout.md"), encoding="utf-8") as f:
    text = " ".join(f.read().split())
  check0 = [r for r in rows if r["check0"] == "True"]
  assert len(check0) == 764 and "(0) holds for 764 of 765 candidates" in text
  data_long = [r for r in check0 if r["data_route"] == "long"]
  assert len(data_long) == 138 and all(r["check_i"] == "True" for r in data_long)
  assert not any(r["check_iii"] == "True" for r in data_long)
  assert max(float(r["empirical_short_share"]) for r in data_long) == 0.35
  assert float(rows[0]["empirical_short_share"]) == 0.15        # long_favoured: 3 of 20
  assert "at most 7 of the 20 datasets (share 0.35; `long_favoured`: 3 of 20)" in text
  data_short = [r for r in check0 if r["data_route"] == "short"]
  full = [r for r in data_short if r["check_i"] == "True" and r["check_iii"] == "True"]
  assert len(data_short) == 626 and len(full) == 132
  holds = {a: sum(round(_per_alpha(r["cql_long_share"])[a] * 20) >= 11
                  and _per_alpha(r["cql_normalized_mean"])[a] < 0.9 for r in full)
           for a in ls.CQL_ALPHAS}
  assert holds == {0.2: 85, 0.5: 23, 1.0: 0, 2.0: 0}
  assert "at alpha 0.2 for 85 and at alpha 0.5 for 23, but at alpha 1 and 2 for none" in text
  assert max(_per_alpha(r["cql_long_share"])[1.0] for r in full) == 0.35
  assert max(_per_alpha(r["cql_long_share"])[2.0] for r in full) == 0.0
  lo1 = min(_per_alpha(r["cql_normalized_mean"])[1.0] for r in full)
  lo2 = min(_per_alpha(r["cql_normalized_mean"])[2.0] for r in full)
  hi = max(max(_per_alpha(r["cql_normalized_mean"])[a] for r in full) for a in (1.0, 2.0))
  assert f"scores {lo1:.2f}-{hi:.2f} and {lo2:.2f}-{hi:.2f}" in text


def _picture_model(rows, p):
  """P [S, A, S'] and r(s, a) = P(arrive at G | s, a), read off the picture: the intended move
  w.p. 1 - p, each other direction w.p. p / 3; off the grid or into '#' stays put; 'L', 'G'
  and '#' cells absorbing with reward 0."""
  h, w = len(rows), len(rows[0])
  steps = ((-1, 0), (0, 1), (1, 0), (0, -1))
  p_mat, r = np.zeros((h * w, 4, h * w)), np.zeros((h * w, 4))
  for s in range(h * w):
    row, col = divmod(s, w)
    if rows[row][col] in "LG#":
      p_mat[s, :, s] = 1.0
      continue
    for a in range(4):
      for d, (dr, dc) in enumerate(steps):
        nr, nc = row + dr, col + dc
        if not (0 <= nr < h and 0 <= nc < w) or rows[nr][nc] == "#":
          nr, nc = row, col
        prob = 1.0 - p if d == a else p / 3.0
        p_mat[s, a, nr * w + nc] += prob
        r[s, a] += prob * (rows[nr][nc] == "G")
  return p_mat, r


def test_check_premise_on_the_tiny_grid():
  """check_premise's exact values on TINY against value iteration written here on the picture's
  model, and its (i) and (iii) verdicts against counts taken here from the same datasets."""
  seeds = (0, 1, 2)
  res = ls.check_premise(TINY, seeds=seeds, num_transitions=300, majority=2)
  start = 3                                                       # S at (1, 0) of a 3 x 3 grid
  for p, key in ((0.15, "v_opt_eval"), (0.3, "v_opt_data")):
    p_mat, r = _picture_model(TINY, p)
    v = np.zeros(9)
    for _ in range(3000):
      v = (r + 0.95 * p_mat @ v).max(1)
    assert res[key] == pytest.approx(v[start], abs=1e-8), key
  # Straight right beside the lava is optimal at both slips (G is two steps away; the top row
  # takes four): check (0), and the data-optimal route.
  assert res["eval_route"] == res["data_route"] == "short" and res["check0"]
  env = GridWorld(slip_prob=0.3, layout=TINY)
  data = dataset_lib.collect(env, dataset_lib.behavior_policy(env), 300, seed=seeds[0],
                             num_datasets=len(seeds))
  into_goal = data.next_state == env.goal_state
  from_entry = into_goal & (data.state == env.state(1, 1))      # the short route's last cell
  assert (res["arrivals_short"], res["arrivals_other"]) == (
      int(from_entry.sum()), int(into_goal.sum() - from_entry.sum()))
  assert res["check_i"] == (res["arrivals_short"] < res["arrivals_other"])
  short = [env.route_name(ls.empirical_optimal_policy(
      learners.empirical_model(data.dataset(i), 9, 4), env.gamma)) == "short" for i in range(3)]
  assert res["empirical_short_share"] == pytest.approx(np.mean(short))
  assert res["check_iii"] == (sum(short) >= 2)
  assert res["passes"] == bool(res["check0"] and res["check_i"] and res["check_ii"]
                               and res["check_iii"])
