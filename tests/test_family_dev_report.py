"""tools/family_dev_report.py's prior rows on a hand-made two-sequence run: the first-episode
difference, the verdict and the final belief mass read from each sequence's last episode."""
import math

import numpy as np

from tools import family_dev_report as report

S, L = 2, 4  # episode e = position * S + sequence (headroom.as_sequences)


def _episodes(per_sequence):
  """[S][L] -> the headroom record's episode order."""
  return [per_sequence[e % S][e // S] for e in range(S * L)]


def _run():
  fixed = [[10, 12, 14, 16], [20, 22, 24, 26]]
  uniform = [[9, 11, 13, 16], [19, 21, 23, 26]]  # 1 below in episodes 1-3, equal in 4
  beliefs = [[0.0, -50.0]] * (S * L)
  beliefs[(L - 1) * S + 0] = [0.0, -50.0]         # sequence 0 ends on the fixed delta
  beliefs[(L - 1) * S + 1] = [0.0, 0.0]           # sequence 1 ends half on it
  beliefs[0] = [-50.0, 0.0]                       # an early episode: not read
  return {"headroom": {"sequences": S, "grid": [0.25, 0.75], "fixed_delta": 0.25,
                       "policies": {"delta=0.2500": _episodes(fixed),
                                    "delta=0.7500": _episodes(fixed),
                                    "CCVL (adaptive)": _episodes(uniform)}},
          "priors": {"heldout_sum": {"adaptive_scores": _episodes(fixed),
                                     "log_beliefs": beliefs}}}


def test_prior_rows_by_hand():
  rows = {r["prior"]: r for r in report.prior_rows(_run())}
  u, h = rows["uniform"], rows["heldout_sum"]
  assert math.isclose(u["first_minus_fixed"]["mean"], -1.0)
  assert math.isclose(u["all_minus_fixed"]["mean"], -0.75)
  assert u["final_mass_on_fixed"] is None and report.first_episodes_verdict(u) == "below"
  assert h["first_minus_fixed"]["mean"] == 0.0 and report.first_episodes_verdict(h) == (
      "not below")
  assert math.isclose(h["minus_uniform"]["mean"], 0.75)
  assert math.isclose(h["final_mass_on_fixed"], (1.0 + 0.5) / 2, rel_tol=1e-9)
  assert math.isclose(h["mean"], np.mean([10, 12, 14, 16, 20, 22, 24, 26]))
