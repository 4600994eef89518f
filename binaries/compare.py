"""The paper's method comparison (Table 2): train and evaluate every method on every dataset kind.

  python binaries/compare.py --suite=gridworld --seeds=3 --output_dir=results/compare_gridworld
  python binaries/compare.py --suite=minatar --data_dir=DATASETS --seeds=3 --workers=2 \
      --output_dir=OUT
  python binaries/compare.py --suite=atari --data_dir=DQN_REPLAY --seeds=5 --output_dir=OUT  # GPU

Writes OUT/scores.csv, OUT/table.md (normalized IQM, 95% stratified bootstrap CIs, per-game
tables), OUT/per_game_<dataset>.md, OUT/iqm.png; per-run logs in OUT/logs, training runs in
OUT/runs, one result file per method/dataset/game/seed in OUT/results (a rerun skips finished
ones and resumes an interrupted training from its checkpoint).
Flags -> CompareConfig -> ccvl_tf.experiments.compare.run (no algorithm code here).
"""
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from ccvl_tf import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.experiments import agent_options
from ccvl_tf.experiments import compare

_D = compare.CompareConfig()
_SUITE = flags.DEFINE_string("suite", _D.suite, f"One of: {', '.join(compare.SUITES)}.")
_METHODS = flags.DEFINE_string("methods", ",".join(_D.methods),
                               f"Comma-separated, from: {', '.join(compare.METHODS)}.")
_DATASETS = flags.DEFINE_string("datasets", ",".join(_D.datasets),
                                "Dataset kinds, comma-separated: 1%,5%,initial10%.")
_GAMES = flags.DEFINE_list("games", None, "Games (default: all of the suite's).")
_SEEDS = flags.DEFINE_integer("seeds", _D.seeds, "Number of seeds per method/dataset/game: "
                              "--first_seed .. --first_seed + N - 1.")
_FIRST = flags.DEFINE_integer("first_seed", _D.first_seed, "First seed (0 for reported tables; "
                              ">= 100 for a development split, docs/agent.md).")
_OUT = flags.DEFINE_string("output_dir", None, "Output directory (resumable).")
_DATA = flags.DEFINE_string("data_dir", None,
                            "minatar: root of binaries/make_minatar_datasets.py output; atari: "
                            "DQN Replay root <data_dir>/<Game>/<run>/replay_logs.")
_RUN = flags.DEFINE_integer("data_run", None, "Which logged run of each game to use (default: "
                            "minatar 0, atari 1).")
_STEPS = flags.DEFINE_integer("num_steps", None, "Gradient steps per training (default: the "
                              "suite's; atari: 6.25M on 1%, 12.5M on 5% / initial 10%).")
_EPISODES = flags.DEFINE_integer("eval_episodes", None, "Evaluation episodes per run.")
_EVAL_MAX = flags.DEFINE_integer("eval_max_steps", None, "Step cap of an evaluation episode.")
_BATCH = flags.DEFINE_integer("batch_size", None, "Transitions per batch (default 32).")
_ALPHA = flags.DEFINE_float("alpha", None, "alpha of CCVL / CQL / AEVL (default: each agent's).")
_LR = flags.DEFINE_float("learning_rate", None, "Adam step size (default: the suite's).")
_TARGET = flags.DEFINE_integer("target_update_period", None, "Target copy period in steps.")
_HEADS = flags.DEFINE_integer("num_heads", None, "REM heads H (default 200).")
_MEMBERS = flags.DEFINE_integer("num_members", None, "AEVL members E (default 4).")
_K = flags.DEFINE_integer("num_grid_deltas", _D.num_grid_deltas, "CCVL belief grid K.")
_N = flags.DEFINE_integer("num_deltas", None, "CCVL N.")
_M = flags.DEFINE_integer("num_pairs", None, "CCVL M.")
_TEMP = flags.DEFINE_float("belief_temperature", None,
                           "Belief temperature of CCVL and AEVL (default: CCVL sets it from "
                           "held-out data, 2 x the smallest mean squared Bellman error over the "
                           "grid; AEVL uses 1).", lower_bound=1e-12, upper_bound=1e12)
agent_options.define_flags()  # CCVL's options, generated from agents.ccvl_agent.CCVLConfig
_DR3 = flags.DEFINE_float("dr3_coef", None, "DR3 coefficient for all methods (default: each "
                          "agent's).")
_WORKERS = flags.DEFINE_integer(
    "workers", _D.workers, "Trainings run side by side, one process each (1: sequential). "
    "Use the number of cores for the CPU suites (gridworld, minatar).")
_THREADS = flags.DEFINE_integer(
    "threads_per_worker", _D.threads_per_worker, "TensorFlow intra/inter-op threads of every "
    "unit, whatever --workers is (the same thread count gives the same numbers; recorded in "
    "scores.csv as tf_threads).", lower_bound=1)
_DETERMINISTIC = flags.DEFINE_boolean(
    "deterministic", _D.deterministic, "tf.config.experimental.enable_op_determinism() in every "
    "unit's process (recorded as deterministic).")
_REPS = flags.DEFINE_integer("bootstrap_reps", _D.bootstrap_reps, "rliable bootstrap reps.")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  if not _OUT.value:
    raise app.UsageError("--output_dir is required")
  try:
    cfg = compare.CompareConfig(
        suite=_SUITE.value, output_dir=_OUT.value,
        methods=compare.parse_methods(_METHODS.value),
        datasets=compare.parse_datasets(_DATASETS.value), games=_GAMES.value,
        seeds=_SEEDS.value, first_seed=_FIRST.value, num_steps=_STEPS.value, eval_episodes=_EPISODES.value,
        eval_max_steps=_EVAL_MAX.value, batch_size=_BATCH.value, alpha=_ALPHA.value,
        learning_rate=_LR.value, target_update_period=_TARGET.value, num_heads=_HEADS.value,
        num_members=_MEMBERS.value, num_grid_deltas=_K.value, num_deltas=_N.value,
        num_pairs=_M.value, belief_temperature=_TEMP.value, dr3_coef=_DR3.value,
        ccvl_options=agent_options.from_flags(), data_dir=_DATA.value, data_run=_RUN.value,
        bootstrap_reps=_REPS.value,
        workers=_WORKERS.value, threads_per_worker=_THREADS.value,
        deterministic=_DETERMINISTIC.value)
    cfg.validate()
  except ValueError as e:
    raise app.UsageError(str(e))
  from ccvl_tf import training  # pylint: disable=g-import-not-at-top
  try:
    compare.run(cfg, log=lambda s: print(s, flush=True))
  except (ValueError, FileNotFoundError, MemoryError, training.TrainingStopped,
          compare.UnitFailed) as e:
    sys.exit(f"compare.py: error: {e}")


if __name__ == "__main__":
  app.run(main)
