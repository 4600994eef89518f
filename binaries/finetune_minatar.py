"""The fine-tuning measurement on MinAtar (paper Table 6's shape): CQL, CCVL (lower bound
only) and CCVL (bounds) fine-tuned online from the MinAtar comparison's offline runs for the
same number of environment steps, scored before and after.

  python binaries/finetune_minatar.py --compare_dir=COMPARE_OUT --data_dir=DATASETS \
      --output_dir=OUT [--games=Breakout,SpaceInvaders] [--seeds=0,1,2] [--num_env_steps=10000]

COMPARE_OUT is the --output_dir of `compare.py --suite=minatar` (its runs/ hold the offline
checkpoints of CQL and CCVL on --dataset). Each run is finetune_online.py in a subprocess;
a rerun skips finished runs. Writes OUT/table.md, OUT/scores.csv (per evaluation), OUT/runs.csv
(per run), OUT/score_vs_steps.png.
Flags -> FinetuneSuiteConfig -> ccvl_tf.experiments.online.finetune_suite.run (docs/online.md).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments.online import finetune_suite

config_flags.define(finetune_suite.FinetuneSuiteConfig)


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  try:
    cfg = config_flags.from_flags(finetune_suite.FinetuneSuiteConfig)
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  try:
    finetune_suite.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, RuntimeError) as e:
    sys.exit(f"finetune_minatar.py: error: {e}")


if __name__ == "__main__":
  config_flags.run(main)
