"""Build the Gymnasium classic-control offline datasets (DQN-Replay style) and their reference
scores.

  python binaries/make_gym_datasets.py --output_dir=data/gym \
      [--envs=CartPole-v1,Acrobot-v1,LunarLander-v3] [--seed=0]

Per task: trains an online DQN (TF-Agents DqnAgent, MLP Q-network; Stable-Baselines3's DQN
with rl-baselines3-zoo's settings for the task) for the recipe's number of env steps and logs
every transition it took into <output_dir>/<EnvId>/seed_<seed>/data.npz (observations,
actions, rewards, terminals, timeouts); then scores its final greedy policy and a uniformly
random policy, the references of normalized scores, in summary.json beside it. A finished task
with the same settings is skipped; one with other settings is refused; an interrupted one is
rebuilt. Seeds: 0 for reported datasets, >= 100 for development ones.
Flags -> ccvl_tf.data.gym_datasets.build_all (no algorithm code here).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import tf_setup  # noqa: E402
tf_setup.pin_cpu_kernels()  # before TensorFlow loads: the same CPU kernels on every machine

from absl import app  # noqa: E402
import tensorflow as tf  # noqa: E402

from ccvl_tf.runtime import config_flags  # noqa: E402
from ccvl_tf.data import gym_datasets  # noqa: E402

config_flags.define(gym_datasets.BuildConfig)  # the `setting` fields of BuildConfig


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  cfg = config_flags.from_flags(gym_datasets.BuildConfig)
  try:
    config_flags.check(cfg, prefix="--")
  except ValueError as e:
    raise app.UsageError(str(e))
  if cfg.tf_threads > 0:
    tf.config.threading.set_intra_op_parallelism_threads(cfg.tf_threads)
    tf.config.threading.set_inter_op_parallelism_threads(cfg.tf_threads)
  try:
    gym_datasets.check_tasks(cfg.envs)
  except ValueError as e:
    raise app.UsageError("--envs: {}".format(e))
  try:
    summaries = gym_datasets.build_all(cfg.output_dir, cfg.envs, seed=cfg.seed,
                                       progress_every=cfg.progress_every,
                                       log=lambda m: print(m, flush=True))
  except ValueError as e:
    raise app.UsageError(str(e))
  print("\n| task | seed | transitions | episodes | behaviour mean return (finished episodes) "
        "| random | final greedy | wall seconds | cached |")
  print("|---|---|---|---|---|---|---|---|---|")
  for env_id, s in summaries.items():
    mean = s["data"]["behaviour_mean_return"]
    print("| {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.0f} | {} |".format(
        env_id, s["settings"]["seed"], s["data"]["transitions"], s["data"]["episodes"],
        "-" if mean is None else "{:.1f}".format(mean), s["reference_scores"]["random"],
        s["reference_scores"]["final_greedy"], s["wall_seconds"],
        "yes" if s.get("cached") else "no"), flush=True)
  for s in summaries.values():
    print(s["data_path"], flush=True)


if __name__ == "__main__":
  config_flags.run(main)
