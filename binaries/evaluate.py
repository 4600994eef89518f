r"""Evaluates an exported CCVL policy (a TF-Agents SavedModel) on Atari, MinAtar or the gridworld.

  python binaries/evaluate.py --policy_dir=DIR --game=Pong --episodes=100 --seeds=5 \
      --output_dir=results/eval/pong
  python binaries/evaluate.py --policy_dir=DIR --game=minatar/Breakout --data_dir=DATASETS \
      --episodes=20 --seeds=3 --output_dir=results/eval/minatar_breakout
  python binaries/evaluate.py --policy_dir=DIR --game=gridworld --episodes=10 --output_dir=OUT

--game selects the environment (ccvl_tf.envs.factory.make_env): 'gridworld' (the paper's
gridworld at evaluation slip 0.15), 'minatar/<Game>' (MinAtar; normalized with the reference
scores of --data_dir) or an Atari game name. Writes returns.csv, delta.csv, summary.json (mean,
IQM, 95% stratified bootstrap CI), results.csv, returns.png and delta.png to --output_dir (see
ccvl_tf.experiments.evaluate and docs/policies.md).
Flags -> EvaluateConfig -> ccvl_tf.experiments.evaluate.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import evaluate

_POLICY_DIR = flags.DEFINE_string("policy_dir", None, "Exported policy (SavedModel) directory.")
_GAME = flags.DEFINE_string(
    "game", None, "'gridworld', a MinAtar game as 'minatar/<Game>' (e.g. minatar/Breakout) or "
    "an Atari game name (e.g. Pong).")
_EPISODES = flags.DEFINE_integer("episodes", 100, "Evaluation episodes per seed (paper: 100).", lower_bound=1)
_SEEDS = flags.DEFINE_integer("seeds", 1, "Number of evaluation runs (seeds first_seed, ...).", lower_bound=1)
_FIRST_SEED = flags.DEFINE_integer("first_seed", 0, "Seed of the first run.", lower_bound=0)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where to write the outputs.")
_EPSILON = flags.DEFINE_float(
    "epsilon", 0.001, "Evaluation epsilon-greedy (paper: 0.001); 0 if the export already is.", lower_bound=0.0, upper_bound=1.0)
_MAX_EPISODE_STEPS = flags.DEFINE_integer(
    "max_episode_steps", None, "Cap on agent steps per episode (default: the env's own).", lower_bound=1)
_BOOTSTRAP_REPS = flags.DEFINE_integer("bootstrap_reps", 2000, "Bootstrap replications.", lower_bound=1)
_METHOD = flags.DEFINE_string("method", "policy", "Method label written to results.csv.")
_DATASET = flags.DEFINE_string("dataset", "", "Dataset label written to results.csv.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "MinAtar only: the dataset root of make_minatar_datasets.py; its "
    "minatar_scores.json gives the random and DQN reference scores of the normalized score "
    "(unset: MinAtar scores are reported raw).")
flags.mark_flags_as_required(["policy_dir", "game", "output_dir"])


def main(argv):
  del argv
  cfg = evaluate.EvaluateConfig(
      policy_dir=_POLICY_DIR.value, game=_GAME.value, output_dir=_OUTPUT_DIR.value,
      episodes=_EPISODES.value, seeds=_SEEDS.value, first_seed=_FIRST_SEED.value,
      epsilon=_EPSILON.value, max_episode_steps=_MAX_EPISODE_STEPS.value,
      bootstrap_reps=_BOOTSTRAP_REPS.value, method=_METHOD.value, dataset=_DATASET.value,
      data_dir=_DATA_DIR.value)
  try:
    summary = evaluate.run(cfg)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"evaluate.py: error: {e}")
  if "normalized_iqm" in summary:
    ci = summary["normalized_iqm_ci95"]
    print(f"{summary['game']}: normalized IQM {summary['normalized_iqm']:.1f} "
          f"(95% CI {ci[0]:.1f}, {ci[1]:.1f}), mean {summary['normalized_mean']:.1f}, "
          f"raw mean {summary['raw_return_mean']:.4g} over {summary['num_episodes']} episodes")
  else:
    print(f"{summary['game']}: raw mean {summary['raw_return_mean']:.4g}")
  print(f"outputs in {_OUTPUT_DIR.value}")


if __name__ == "__main__":
  app.run(main)
