"""The comparison's process pool: training groups run side by side in spawned workers.

Each worker process configures TensorFlow once (`worker_init`), then runs whole training
groups (`compare_units.training_groups`: units that share a trained learner stay together);
a failure comes back as `UnitFailed`, naming the unit and its log.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import logging

from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import suites as compare_suites
from ccvl_tf.experiments.compare import units as compare_units
from ccvl_tf.experiments import tf_setup
from ccvl_tf.runtime import worker_lifetime


_WORKER_SUITE: Optional[compare_suites.Suite] = None
_WORKER_TF: Dict[str, object] = {}
Unit = compare_units.Unit


class UnitFailed(RuntimeError):
  """A unit (method/dataset/game/seed) raised in a worker process; names it and its log."""


def worker_init(cfg: compare_config.CompareConfig, threads: int,
                parent_pid: Optional[int] = None) -> None:
  """Runs once in each worker process, before TensorFlow executes anything (the local pool's
  workers and the Ray engine's, ray_engine.py)."""
  global _WORKER_SUITE
  worker_lifetime.die_with_parent(parent_pid)  # no orphans training on after a killed parent
  _WORKER_TF.update(tf_setup.configure_tensorflow(threads, cfg.deterministic))
  logging.set_verbosity(logging.ERROR)
  _WORKER_SUITE = compare_suites.SUITE_CLASSES[cfg.suite](cfg)


def initialized_for(cfg: compare_config.CompareConfig) -> bool:
  """Whether this process ran `worker_init` for `cfg` (a Ray worker process runs many units)."""
  return _WORKER_SUITE is not None and _WORKER_SUITE.cfg == cfg


def failure_message(unit: Unit, cause: str, output_dir: str) -> str:
  dataset, game, seed, method = unit
  return (f"{method} on {dataset} {game} seed {seed} failed in a worker: {cause}; log: "
          f"{compare_units.unit_log_path(output_dir, unit)}. Finished units are kept: rerun "
          "the same command to resume.")


def worker_run(group: List[Unit]) -> List[Tuple[Unit, dict, float]]:
  """Runs one training group in a worker set up by `worker_init`; returns (unit, row, seconds)
  per unit."""
  out = []
  for unit in group:
    t = time.time()
    try:
      row = compare_units.run_logged(_WORKER_SUITE, unit, _WORKER_TF)
    except Exception as e:  # pylint: disable=broad-except
      # Re-raised as a plain-message exception: the pool pickles it back to the parent, and
      # exceptions with their own __init__ (TrainingStopped, NonFiniteLossError) do not unpickle.
      raise UnitFailed(failure_message(unit, f"{type(e).__name__}: {e}",
                                       _WORKER_SUITE.cfg.output_dir)) from None
    out.append((unit, row, time.time() - t))
  return out


def run_parallel(cfg: compare_config.CompareConfig, todo: Sequence[Unit], report) -> None:
  """Runs `todo` in min(cfg.workers, groups) spawned processes, one training group per task;
  calls report(unit, row, seconds) in this process as groups finish."""
  threads = cfg.threads_per_worker
  groups = compare_units.training_groups(todo)
  ctx = multiprocessing.get_context("spawn")  # a fresh TensorFlow per worker (no fork of TF)
  with concurrent.futures.ProcessPoolExecutor(
      max_workers=min(cfg.workers, len(groups)), mp_context=ctx, initializer=worker_init,
      initargs=(cfg, threads, os.getpid())) as pool:
    futures = {pool.submit(worker_run, g): g for g in groups}
    try:
      for fut in concurrent.futures.as_completed(futures):
        try:
          results = fut.result()
        except UnitFailed:
          raise
        except Exception as e:  # pylint: disable=broad-except
          # e.g. BrokenProcessPool: the worker died (killed, out of memory) inside this group.
          raise UnitFailed(failure_message(futures[fut][0], f"{type(e).__name__}: {e}",
                                            cfg.output_dir)) from e
        for unit, row, seconds in results:
          report(unit, row, seconds)
    except BaseException:
      for f in futures:
        f.cancel()
      raise
