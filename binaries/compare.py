"""The paper's method comparison (Table 2): train and evaluate every method on every dataset kind.

  python binaries/compare.py --suite=gridworld --seeds=3 --output_dir=results/compare_gridworld
  python binaries/compare.py --suite=minatar --data_dir=DATASETS --seeds=3 --workers=2 \
      --output_dir=OUT
  python binaries/compare.py --suite=atari --data_dir=DQN_REPLAY --seeds=5 --output_dir=OUT  # GPU
  python binaries/compare.py --suite=atari --data_dir=DQN_REPLAY --seeds=5 --output_dir=SHARED \
      --engine=ray --ray_address=auto --ray_num_gpus=1  # one Ray task per unit on a cluster

Writes OUT/scores.csv, OUT/table.md (normalized IQM, 95%% stratified bootstrap CIs, per-game
tables), OUT/per_game_<dataset>.md, OUT/iqm.png; per-run logs in OUT/logs, training runs in
OUT/runs, one result file per method/dataset/game/seed in OUT/results (a rerun skips finished
ones and resumes an interrupted training from its checkpoint).
Flags -> CompareConfig -> ccvl_tf.experiments.compare.runner.run (no algorithm code here).
"""
import sys


import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import training
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import pool as compare_pool
from ccvl_tf.experiments.compare import runner as compare

config_flags.define(compare_config.CompareConfig)  # the `setting` fields of CompareConfig
agent_options.define_flags()  # CCVL's options, generated from ccvl_tf.agents.ccvl_agent.CCVLConfig


def main(argv):
  del argv
  cfg = config_flags.config_from_flags(compare_config.CompareConfig, required=("output_dir",),
                                       ccvl_options=agent_options.from_flags())
  try:
    compare.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, MemoryError, training.TrainingStopped,
          training.WriteFailed,
          compare_pool.UnitFailed) as e:
    sys.exit(f"compare.py: error: {e}")


if __name__ == "__main__":
  config_flags.run(main)
