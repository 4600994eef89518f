"""tools/matched_learners.py's pure pieces: the matched alphas and the paired bootstrap
(docs/matched_learners.md)."""
import math

import numpy as np

from tools import matched_learners as ml


def test_expected_weight_closed_form_at_delta_one():
  # delta = 1: E sqrt(X), X = max of two Exp(1), density 2 e^-x - 2 e^-2x:
  # 2 Gamma(3/2) - 2 Gamma(3/2) / 2^(3/2) = sqrt(pi) (1 - 2^(-3/2)).
  assert math.isclose(ml.expected_weight(1.0), math.sqrt(math.pi) * (1 - 2 ** -1.5),
                      rel_tol=1e-6)


def test_expected_weight_bounds_and_order():
  # sqrt(L + E X) bounds it above (Jensen, E X = 3/2); sqrt(L) below; smaller delta, larger w.
  w = [ml.expected_weight(d) for d in ml.grid()]
  for d, wk in zip(ml.grid(), w):
    lo, hi = math.sqrt(math.log(1 / d)), math.sqrt(math.log(1 / d) + 1.5)
    assert lo < wk < hi
  assert all(a > b for a, b in zip(w, w[1:]))
  alphas = [a for _, _, a in ml.matched_alphas()]
  assert math.isclose(alphas[0], 3 * w[0]) and round(alphas[0], 3) == 6.154
  assert round(alphas[-1], 3) == 3.535


def test_bootstrap_is_paired_over_states():
  a = np.array([1.0, 0.0, 1.0, 0.0])
  stats = ml.bootstrap_means({"a": a, "b": a.copy(), "d": ml.disagreement([0, 1, 2, 3],
                                                                         [0, 2, 2, 0])})
  assert stats["a"][0] == 0.5
  assert stats["a"] == stats["b"]  # the same resampled states for every series
  assert stats["a"][1] < 0.5 < stats["a"][2]
  assert stats["d"][0] == 0.5 and 0.0 <= stats["d"][1] <= 0.5 <= stats["d"][2] <= 1.0


def test_disagreements_from_greedy_actions_by_hand():
  # 4 states, K = 8 members: F's members all alike but state 3 at member 7; learners L_0..L_7
  # alike but L_0 differs at states 0 and 1; the floor differs from L_7 at state 0.
  f = np.zeros((4, 8), int)
  f[3, 7] = 2
  learners = [np.array([1, 1, 0, 0])] + [np.zeros(4, int)] * 7
  d = ml.summarize({"F": f, "L": learners, "floor": np.array([3, 0, 0, 0])})
  assert d["F_any"]["mean"] == 0.25 and d["F_0_7"]["mean"] == 0.25 and d["F_0_1"]["mean"] == 0
  assert d["F_6_7"]["mean"] == 0.25 and "Q_any" not in d
  assert d["L_0_1"]["mean"] == 0.5 and d["L_1_2"]["mean"] == 0 and d["L_0_7"]["mean"] == 0.5
  assert d["floor_7_7b"]["mean"] == 0.25
  assert d["rule1_L07_minus_floor"]["mean"] == 0.25 and d["rule3_L07_minus_F07"]["mean"] == 0.25
