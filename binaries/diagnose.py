"""The confidence diagnostics of a CCVL run: does Q(s, a, delta) depend on delta, does n(s)^-1
separate seen from unseen states, does the belief move?

  python binaries/diagnose.py --root_dir=runs/breakout_demo [--episodes=N]

Reads the run's summary.json (its configuration) and latest checkpoint, and writes
ROOT/diagnostics/: diagnostics.json (every number, and the train step and checkpoint they
describe), delta_family.png (V(s, delta) curves),
belief.csv and belief.png (expected delta and entropy per evaluation episode). Prints the
headline numbers: family_spread (mean V(s, top delta) - V(s, bottom delta) over dataset states,
divided by the mean |TD target|), lemma1_fraction (states where V is nondecreasing in delta),
count_auc (ROC AUC of n(s)^-1 as a classifier of random-policy states vs dataset states; 0.5 =
no separation), effective_rank vs mean_inv_count_x_size, belief_max_shift (largest move of the
belief's expected delta from the prior's) and belief_final_entropy (vs log K).
train_offline.py computes the same at the end of every CCVL run. See docs/agent.md.
Flags -> ccvl_tf.experiments.offline.runner.diagnose (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import training
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.offline import runner as offline

config_flags.define(offline_config.DiagnoseConfig)  # --root_dir, --episodes


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  cfg = config_flags.from_flags(offline_config.DiagnoseConfig)
  if cfg.episodes is not None and cfg.episodes < 1:
    raise app.UsageError(f"--episodes must be >= 1, got {cfg.episodes}")
  try:
    summary = offline.diagnose(cfg.root_dir, cfg.episodes,
                               log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, MemoryError, training.WriteFailed) as e:
    # A directory that is not a finished run, a summary.json that is not one, a checkpoint of
    # another run, a run directory in use, a failed write: one clear line, no traceback.
    sys.exit(f"diagnose.py: error: {e}")
  width = max(len(k) for k in summary)
  for k, v in summary.items():
    print(f"{k.ljust(width)}  {v:.6g}")
  print(f"Files: {cfg.root_dir}/diagnostics/", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
