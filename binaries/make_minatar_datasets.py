"""Build the MinAtar offline datasets (DQN-Replay style) and their reference scores.

  python binaries/make_minatar_datasets.py --output_dir=data/minatar \
      [--games=Asterix,Breakout,Freeway,Seaquest,SpaceInvaders] [--steps=100000] \
      [--game_steps=Asterix:300000,Freeway:300000,Seaquest:300000] [--seed=0]

Per game: trains an online DQN (TF-Agents DqnAgent, MinAtar's network and DQN
baseline hyperparameters) for --steps environment steps (--game_steps per game) and logs every
transition into --num_checkpoints Dopamine replay checkpoints under
<output_dir>/<Game>/<seed>/replay_logs; then scores the final DQN (epsilon
0.001) and a uniformly random policy. Writes <output_dir>/minatar_scores.json:
the "dqn" and "random" reference scores that MinAtar results are normalized
with: (score - random) / (dqn - random). Finished games (a COMPLETE marker) are
skipped; an interrupted game is deleted and rebuilt. See docs/minatar.md.
Flags -> ccvl_tf.data.minatar_datasets.build_all (no algorithm code here).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ccvl_tf  # noqa: E402,F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import app  # noqa: E402
import tensorflow as tf  # noqa: E402

from ccvl_tf.runtime import config_flags  # noqa: E402
from ccvl_tf.data import minatar_datasets  # noqa: E402
from ccvl_tf.envs import minatar  # noqa: E402

config_flags.define(minatar_datasets.BuildConfig)  # the `setting` fields of BuildConfig


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  cfg = config_flags.from_flags(minatar_datasets.BuildConfig)
  if not cfg.games:
    raise app.UsageError("--games is empty; valid games: " + ", ".join(minatar.valid_game_names()))
  try:
    games = [minatar.canonical_game_name(g) for g in cfg.games]
  except ValueError as e:
    raise app.UsageError("--games: {}".format(e))
  try:
    game_steps = minatar_datasets.parse_game_steps(cfg.game_steps)
  except ValueError as e:
    raise app.UsageError("--game_steps: {}".format(e))
  for name in ("steps", "num_checkpoints", "eval_episodes", "random_episodes",
               "progress_every"):
    if getattr(cfg, name) < 1:
      raise app.UsageError("--{} must be >= 1, got {}".format(name, getattr(cfg, name)))
  try:
    config_flags.check(cfg, prefix="--")
  except ValueError as e:
    raise app.UsageError(str(e))
  if cfg.tf_threads > 0:
    tf.config.threading.set_intra_op_parallelism_threads(cfg.tf_threads)
    tf.config.threading.set_inter_op_parallelism_threads(cfg.tf_threads)
  try:
    summaries = minatar_datasets.build_all(
        cfg.output_dir, games, num_steps=cfg.steps, game_steps=game_steps, seed=cfg.seed,
        num_checkpoints=cfg.num_checkpoints, eval_episodes=cfg.eval_episodes,
        random_episodes=cfg.random_episodes, progress_every=cfg.progress_every,
        log=lambda m: print(m, flush=True))
  except ValueError as e:
    raise app.UsageError(str(e))
  print("\n| game | steps | DQN eval return | random return | build seconds | cached |")
  print("|---|---|---|---|---|---|")
  for g, s in summaries.items():
    print("| {} | {} | {:.2f} | {:.2f} | {:.0f} | {} |".format(
        g, s["settings"]["steps"], s["dqn_eval_mean"], s["random_mean"], s["total_seconds"],
        "yes" if s.get("cached") else "no"), flush=True)
  print("reference scores: {}".format(
      os.path.join(cfg.output_dir, minatar_datasets.SCORES_FILENAME)), flush=True)


if __name__ == "__main__":
  config_flags.run(main)
