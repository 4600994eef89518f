"""The paper's gridworld experiment (Fig. 1, Fig. 2, Theorem 1 coverage).

  python binaries/gridworld.py --output_dir=results/gridworld [--seeds=10]

Writes alpha_sweep.csv, delta_adaptation.csv, coverage.csv, summary.json and the figures
alpha_sweep.png, delta_adaptation.png, trajectories.png, coverage.png; prints a summary table.
Flags -> Config -> ccvl_tf.experiments.gridworld.runner.run (no algorithm code here).
"""

from absl import app

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments.gridworld import runner as gridworld

config_flags.define(gridworld.Config)  # the `setting` fields of gridworld.Config


def main(argv):
  del argv
  try:
    cfg = config_flags.from_flags(gridworld.Config)
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  gridworld.run(cfg, log=lambda *a, **k: print(*a, **k, flush=True))


if __name__ == "__main__":
  config_flags.run(main)
