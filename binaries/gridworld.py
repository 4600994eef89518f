"""The paper's gridworld experiment (Fig. 1, Fig. 2, Theorem 1 coverage).

  python binaries/gridworld.py --output_dir=results/gridworld [--seeds=10]

Writes alpha_sweep.csv, delta_adaptation.csv, coverage.csv, summary.json and the figures
alpha_sweep.png, delta_adaptation.png, trajectories.png, coverage.png; prints a summary table.
Flags -> Config -> ccvl_tf.experiments.gridworld.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import gridworld

_OUT = flags.DEFINE_string("output_dir", None, "Directory for the CSV/PNG/JSON outputs.",
                           required=True)
_SEEDS = flags.DEFINE_integer("seeds", 10, "Datasets / evaluation runs per alpha (>= 1).")
_ALPHAS = flags.DEFINE_list("alphas", [str(a) for a in gridworld.DEFAULT_ALPHAS],
                            "alpha grid of the sweep (Fig. 1 left), each >= 0.")
_NUM_DELTAS = flags.DEFINE_integer("num_deltas", 10, "K, size of the quantized delta grid.")
_EPISODES = flags.DEFINE_integer("eval_episodes", 10,
                                 "Evaluation episodes per seed; CCVL's belief adapts across them.")
_ADAPT_ALPHA = flags.DEFINE_float("adaptation_alpha", 0.2, "alpha of Fig. 1 right.")
_TRAJ_ALPHA = flags.DEFINE_float("trajectory_alpha", 1.0, "alpha of Fig. 2.")
_COV_N = flags.DEFINE_integer("coverage_datasets", 200,
                              "Resampled datasets for the Theorem 1 coverage study.")
_COV_ALPHA = flags.DEFINE_float("coverage_alpha", 0.2,
                                "A practical alpha shown beside the theorem's in coverage.csv.")
_TRANSITIONS = flags.DEFINE_integer("num_transitions", 2500, "Transitions per offline dataset.")
_SELECT = flags.DEFINE_enum("delta_select", "sample", ["sample", "argmax"],
                            "How the adaptive policy picks delta from its belief.")


def main(argv):
  del argv
  try:
    alphas = tuple(float(a) for a in _ALPHAS.value)
  except ValueError as e:
    raise app.UsageError(f"--alphas must be numbers, got {_ALPHAS.value}: {e}")
  cfg = gridworld.Config(
      output_dir=_OUT.value, seeds=_SEEDS.value, alphas=alphas, num_deltas=_NUM_DELTAS.value,
      eval_episodes=_EPISODES.value, adaptation_alpha=_ADAPT_ALPHA.value,
      trajectory_alpha=_TRAJ_ALPHA.value, coverage_datasets=_COV_N.value,
      coverage_alpha=_COV_ALPHA.value, num_transitions=_TRANSITIONS.value,
      delta_select=_SELECT.value)
  try:
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  gridworld.run(cfg, log=lambda *a, **k: print(*a, **k, flush=True))


if __name__ == "__main__":
  app.run(main)
