"""The run settings several binaries share, each declared once: its help, its bounds and its
usual default.

A run config takes one with `borrow(name)`: the declaration as it is, or with the run's own
default where the run needs another value (`default=`; None: "not given", `note` says what
applies then), or with its own lower bound where the run allows less or needs more (e.g. 0
evaluation episodes: none). The bounds are checked when the config is validated
(`config_flags.check`, a one-line "--name must be ..."), not while the flags are parsed, so
every binary words a bad value the same way. The agents' own settings are declared in their
configs (ccvl_tf/agents/*_agent.py), not here.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime.config_flags import setting

def _count(default: int, help: str, lower_bound: int = 1,  # pylint: disable=redefined-builtin
           upper_bound: Optional[int] = None):
  """An integer setting checked when the config is validated."""
  return setting(default, help, lower_bound=lower_bound, upper_bound=upper_bound,
                 parse_bounds=False)


# Where the adaptive policy's belief starts (belief_prior; experiments/agent_registry.py
# computes the informed ones with ccvl_tf.algorithm.belief.informed_log_prior).
BELIEF_PRIORS = ("uniform", "heldout_mean", "heldout_sum")


# The most TensorFlow threads (intra- and inter-op each) a thread setting may ask for. Every
# thread setting is declared with it, so a count no machine runs is refused in the one
# settings check before anything runs (`--tf_threads=100000` made train_offline.py hang
# silently after loading its data; 1,000 on 2 cores still ran). A fixed cap, not a multiple of
# os.cpu_count(): a record written on a large machine must still read back on a small one.
MAX_THREADS = 1024


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """One declaration per run setting (the defaults: the offline demo's where it has the
  setting)."""
  seed: int = _count(0, "Seed of the run: its random streams (data order, initial weights, "
                     "deltas, environments, evaluation episodes) are derived from it.", 0)
  first_seed: int = _count(0, "Seed of the first run, the others first_seed + 1, ... (0 for "
                           "reported results; >= 100 for development runs, docs/agent.md).", 0)
  num_steps: int = _count(10_000, "Gradient steps of each training.")
  batch_size: int = _count(32, "Transitions per batch (one gradient step).")
  eval_episodes: int = _count(10, "Episodes per evaluation of a policy (0, where the run "
                              "allows it: no evaluation).")
  eval_max_steps: int = _count(2_000, "Agent-step cap of an evaluation episode.")
  eval_interval: int = _count(5_000, "Training steps between evaluations (0, where the run "
                              "allows it: only its first and last evaluation).", 0)
  log_interval: int = _count(500, "Progress line every N steps.")
  checkpoint_interval: int = _count(2_500, "Checkpoint every N steps.")
  progress_every: int = _count(10_000, "Print progress every N steps.")
  bootstrap_reps: int = _count(2_000, "Bootstrap replications of the 95% confidence "
                               "intervals.")
  num_grid_deltas: int = setting(8, "K, the quantized delta grid of the adaptive and "
                                 "Fixed-CCVL policies.", lower_bound=1, upper_bound=1024,
                                 parse_bounds=False)
  belief_temperature: float = setting(
      None, "Temperature of the adaptive policy's belief update (unset: CCVL's is set from "
      "held-out data, 2 x the smallest mean squared Bellman error over the grid; AEVL's is "
      "its config's).", lower_bound=1e-12, upper_bound=1e12)
  belief_prior: str = setting(
      "uniform", "Where the adaptive policy's belief starts, from the held-out Bellman errors "
      "e(delta) and temperature T that choose Fixed-CCVL's delta: uniform = -log K for every "
      "grid delta; heldout_mean = log b_0 proportional to -e(delta)/T (the belief after one "
      "transition of the data's mean errors); heldout_sum = -N e(delta)/T, N the held-out "
      "transitions those errors average over (docs/belief_prior.md).",
      enum_values=list(BELIEF_PRIORS))
  workers: int = _count(1, "Trainings run side by side, one process each (1: one after "
                        "another; the number of cores suits the CPU suites' small networks).")
  # The trained weights depend on the intra-op thread count, and TensorFlow's default is the
  # number of cores (BUILD.md, "What is and is not bit-reproducible").
  tf_threads: int = _count(2, "TensorFlow intra- and inter-op threads (0: TensorFlow's "
                           "default, the number of cores); the trained network depends on "
                           "it.", 0, MAX_THREADS)
  threads_per_worker: int = _count(1, "TensorFlow intra/inter-op threads of every training "
                                   "process, whatever --workers is (the same thread count "
                                   "gives the same numbers).", 1, MAX_THREADS)
  deterministic: bool = setting(False, "tf.config.experimental.enable_op_determinism() in "
                                "every training process (GPU kernels; on CPU results are "
                                "already deterministic for a fixed thread count).")
  offline_dir: str = setting("", "root_dir of the offline run to fine-tune.", flag_default=None)
  num_env_steps: int = _count(100_000, "Env steps of online interaction per run (all actors "
                              "together).")
  min_replay_size: int = _count(1_000, "Items in the replay table before the first learner "
                                "step.")
  samples_per_insert: float = setting(
      8.0, "Rate limiter: sampled items per inserted env step (8 = batch 32, one learner step "
      "per 4 env steps).", lower_bound=1e-6, upper_bound=1e6, parse_bounds=False)


def borrow(name: str, default=config_flags.DECLARED, note: Optional[str] = None,
           **bounds) -> dataclasses.Field:
  """A run config's field for the run setting `name` (config_flags.borrow): the declared
  default, or the run's own `default` (None: not given, `note` saying what applies then);
  `bounds`: the run's own lower_bound."""
  return config_flags.borrow(RunSettings, name, note, default=default, **bounds)
