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
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from ccvl_tf.data import minatar_datasets  # noqa: E402
from ccvl_tf.envs import minatar  # noqa: E402

_GAMES = flags.DEFINE_list("games", minatar.valid_game_names(),
                           "MinAtar games: " + ", ".join(minatar.valid_game_names()))
_STEPS = flags.DEFINE_integer("steps", minatar_datasets.DEFAULT_STEPS,
                              "Environment steps (= logged transitions) of each DQN run, "
                              "except the games named in --game_steps.")
_GAME_STEPS = flags.DEFINE_string(
    "game_steps", ",".join("{}:{}".format(g, n) for g, n in
                           minatar_datasets.DEFAULT_GAME_STEPS.items()),
    "Per-game overrides of --steps, Game:steps comma-separated ('' = --steps for all). The "
    "default gives the games whose DQN learns slowly a longer run (docs/minatar.md).")
_OUT = flags.DEFINE_string("output_dir", None, "Root directory of the datasets.",
                           required=True)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the run (env, network init, exploration, "
                             "replay sampling); also the run directory's name.", lower_bound=0)
_CKPTS = flags.DEFINE_integer("num_checkpoints", minatar_datasets.DEFAULT_NUM_CHECKPOINTS,
                              "Dopamine checkpoints per run (DQN Replay: 50).")
_EVAL = flags.DEFINE_integer("eval_episodes", 20, "Episodes scoring the final DQN.")
_RANDOM = flags.DEFINE_integer("random_episodes", 100, "Episodes scoring a random policy.")
_EVERY = flags.DEFINE_integer("progress_every", 5_000, "Print progress every N steps.")
_THREADS = flags.DEFINE_integer("tf_threads", 1, "TensorFlow intra/inter-op threads (0: TF's "
                                "default). One thread is fastest for this tiny network.", lower_bound=0)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError("unexpected arguments: {}".format(" ".join(argv[1:])))
  if not _GAMES.value:
    raise app.UsageError("--games is empty; valid games: " + ", ".join(minatar.valid_game_names()))
  try:
    games = [minatar.canonical_game_name(g) for g in _GAMES.value]
  except ValueError as e:
    raise app.UsageError("--games: {}".format(e))
  try:
    game_steps = minatar_datasets.parse_game_steps(_GAME_STEPS.value)
  except ValueError as e:
    raise app.UsageError("--game_steps: {}".format(e))
  for name, flag in (("steps", _STEPS), ("num_checkpoints", _CKPTS),
                     ("eval_episodes", _EVAL), ("random_episodes", _RANDOM),
                     ("progress_every", _EVERY)):
    if flag.value < 1:
      raise app.UsageError("--{} must be >= 1, got {}".format(name, flag.value))
  if _THREADS.value > 0:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    tf.config.threading.set_intra_op_parallelism_threads(_THREADS.value)
    tf.config.threading.set_inter_op_parallelism_threads(_THREADS.value)
  try:
    summaries = minatar_datasets.build_all(
        _OUT.value, games, num_steps=_STEPS.value, game_steps=game_steps, seed=_SEED.value,
        num_checkpoints=_CKPTS.value, eval_episodes=_EVAL.value,
        random_episodes=_RANDOM.value, progress_every=_EVERY.value,
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
      os.path.join(_OUT.value, minatar_datasets.SCORES_FILENAME)), flush=True)


if __name__ == "__main__":
  app.run(main)
