"""The alpha sweep: normalized score vs alpha for CQL, CCVL and Fixed-CCVL, with BC
as the alpha-free reference -- the neural version of the paper's Fig. 1 (left).

  python binaries/alpha_sweep.py --suite=minatar --data_dir=DATASETS --games=Breakout,Seaquest \
      --datasets=5%% --seeds=5 --workers=2 --output_dir=OUT [--alphas=0.03,0.1,0.3,1,3,10]
  python binaries/alpha_sweep.py --suite=gridworld --seeds=3 --output_dir=OUT   # CPU minutes

Runs binaries/compare.py's machinery once per alpha into OUT/alpha_<a>/ (CQL, CCVL, Fixed-CCVL;
the last two share one training) and once for BC into OUT/bc/; every compare flag except
--alpha applies to every part (see binaries/compare.py). Writes OUT/rows.csv (one row per run
with CCVL's diagnostics), OUT/table.md (IQM [95%% CI] per method and alpha, flatness over alpha,
CCVL's delta family vs alpha) and OUT/alpha_sweep.png. Rerunning the same command resumes.
Flags -> AlphaSweepConfig -> ccvl_tf.experiments.compare.alpha_sweep.run (no algorithm code here).
Protocol and reading: docs/alpha_sweep.md.
"""
import sys

from absl import app

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments.compare import alpha_sweep
from ccvl_tf.runtime import training
from ccvl_tf.experiments.compare import pool as compare_pool

config_flags.define(alpha_sweep.AlphaSweepConfig)  # CompareConfig's flags but --alpha; --alphas
agent_options.define_flags()  # CCVL's options, generated from ccvl_tf.agents.ccvl_agent.CCVLConfig


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  cfg = config_flags.config_from_flags(alpha_sweep.AlphaSweepConfig, required=("output_dir",),
                                       ccvl_options=agent_options.from_flags())
  try:
    out = alpha_sweep.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, MemoryError, training.TrainingStopped,
          training.WriteFailed,
          compare_pool.UnitFailed) as e:
    sys.exit(f"alpha_sweep.py: error: {e}")
  print(f"Table: {out['paths']['table']}", flush=True)


if __name__ == "__main__":
  config_flags.run(main)
