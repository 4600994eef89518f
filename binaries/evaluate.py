r"""Evaluates an exported CCVL policy (a TF-Agents SavedModel) on Atari, MinAtar, the gridworld or a
Gymnasium environment.

  python binaries/evaluate.py --policy_dir=DIR --game=Pong --episodes=100 --seeds=5 \
      --output_dir=results/eval/pong
  python binaries/evaluate.py --policy_dir=DIR --game=minatar/Breakout --data_dir=DATASETS \
      --episodes=20 --seeds=3 --output_dir=results/eval/minatar_breakout
  python binaries/evaluate.py --policy_dir=DIR --game=gridworld --episodes=10 --output_dir=OUT
  python binaries/evaluate.py --policy_dir=DIR --game=gymnasium:CartPole-v1 --episodes=10 \
      --output_dir=OUT

--game selects the environment (ccvl_tf.envs.factory.make_env): 'gridworld' (the paper's
gridworld at evaluation slip 0.15), 'minatar/<Game>' (MinAtar; normalized with the reference
scores of --data_dir), 'gymnasium:<EnvId>' (a registered Gymnasium environment with a Discrete
action space; its raw return, not normalized) or an Atari game name. Writes returns.csv,
delta.csv, summary.json (mean, IQM, 95%% stratified bootstrap CI), results.csv, returns.png and
delta.png to --output_dir (see ccvl_tf.experiments.score_export and docs/policies.md).
Flags -> EvaluateConfig -> ccvl_tf.experiments.score_export.run (no algorithm code here).
"""
import sys

from absl import flags

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.experiments import score_export
from ccvl_tf.runtime import writes

config_flags.define(score_export.EvaluateConfig)  # the `setting` fields of EvaluateConfig
flags.mark_flags_as_required(["policy_dir", "game", "output_dir"])


def main(argv):
  del argv
  cfg = config_flags.from_flags(score_export.EvaluateConfig)
  try:
    summary = score_export.run(cfg)
  except (ValueError, FileNotFoundError, writes.WriteFailed) as e:
    sys.exit(f"evaluate.py: error: {e}")
  if "normalized_iqm" in summary:
    ci = summary["normalized_iqm_ci95"]
    print(f"{summary['game']}: normalized IQM {summary['normalized_iqm']:.1f} "
          f"(95% CI {ci[0]:.1f}, {ci[1]:.1f}), mean {summary['normalized_mean']:.1f}, "
          f"raw mean {summary['raw_return_mean']:.4g} over {summary['num_episodes']} episodes")
  else:
    print(f"{summary['game']}: raw mean {summary['raw_return_mean']:.4g}")
  print(f"outputs in {cfg.output_dir}")


if __name__ == "__main__":
  config_flags.run(main)
