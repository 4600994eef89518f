"""The comparison on a Ray cluster (--engine=ray): one Ray task per unit, scheduled by Ray.

Each unit (dataset kind, game, seed, method) is one task asking Ray for `threads_per_worker`
CPUs and `ray_num_gpus` GPUs. A task runs the local pool's own worker entry (pool.worker_init
once per Ray worker process, then pool.worker_run on the one unit), so a unit writes the same
result file and row whichever engine runs it. The units of one training group (CCVL and
Fixed-CCVL share a trained learner, units.training_groups) are chained: each task takes the
previous one's result as an argument, so Ray starts it only after that one has finished and
two tasks never train one checkpoint directory at once. The driver (this process) reports rows
as tasks finish; runner.run then writes the outputs from the result files.

Every node reads and writes the same --output_dir (and --data_dir): a file system mounted at
the same path on each (docs/compare.md, "On a Ray cluster"). Ray is imported only here, and
only when --engine=ray runs.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from typing import Callable, Dict, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

from ccvl_tf.experiments.compare import config as compare_config

# The environment a unit's TensorFlow loads under, handed to the Ray workers as the local
# pool's spawned workers inherit it: Keras 2 for TF-Agents (ccvl_tf/__init__.py), the C++ log
# level and the quiet start (quiet.py), the CPU kernels (tf_setup.CPU_KERNELS).
WORKER_ENV = ("TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL", "CCVL_VERBOSE",
              "TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA")


def worker_env(num_gpus: float) -> Dict[str, str]:
  """The variables of WORKER_ENV this process has, for every unit's task; with a fraction of a
  GPU per task also TF_FORCE_GPU_ALLOW_GROWTH, since TensorFlow otherwise takes all of a GPU's
  memory at start and the other tasks sharing it could not start."""
  env = {k: os.environ[k] for k in WORKER_ENV if k in os.environ}
  if 0 < num_gpus < 1:
    env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
  return env


def _shared_paths(cfg: compare_config.CompareConfig) -> compare_config.CompareConfig:
  """`cfg` with --output_dir and a local --data_dir made absolute: a Ray worker does not run
  in the driver's working directory."""
  data_dir = cfg.data_dir
  if data_dir and "://" not in data_dir:
    data_dir = os.path.abspath(data_dir)
  return dataclasses.replace(cfg, output_dir=os.path.abspath(cfg.output_dir), data_dir=data_dir)


def run_unit_task(cfg: compare_config.CompareConfig, unit, after=None):
  """A unit in a Ray worker process: the local pool's worker set-up (once per process and
  config), then its worker entry on this one unit; returns (unit, row, seconds). `after`, the
  previous unit of the training group (an ObjectRef Ray resolves first), is not used."""
  del after
  from ccvl_tf.experiments.compare import pool  # pylint: disable=g-import-not-at-top
  if not pool.initialized_for(cfg):
    pool.worker_init(cfg, cfg.threads_per_worker)
  (result,) = pool.worker_run([unit])
  return result


# Seconds a HOST:PORT of --ray_address gets to accept a TCP connection before the run is
# refused (Ray itself retries an address where nothing answers for minutes).
REACH_TIMEOUT_S = 10.0


def check_reachable(address: Optional[str], timeout_s: float = REACH_TIMEOUT_S) -> None:
  """ValueError naming --ray_address (or, without it, the RAY_ADDRESS environment variable
  Ray then reads) when it is not auto, local or HOST:PORT (or ray://HOST:PORT) with a port in
  1..65535, or nothing accepts a TCP connection there within `timeout_s`; 'auto', 'local' and
  neither set are left to Ray (they name no address to try)."""
  name = "--ray_address"
  if not address and os.environ.get("RAY_ADDRESS", "").strip():
    name, address = "RAY_ADDRESS", os.environ["RAY_ADDRESS"].strip()
  if not address or address in ("auto", "local"):
    return
  hostport = address.split("://", 1)[-1]
  host, sep, port = hostport.rpartition(":")
  if not sep or not host or not port.isdigit():
    raise ValueError(f"{name}={address}: expected auto, local or HOST:PORT (the "
                     f"address `ray start --head` prints)")
  if not 1 <= int(port) <= 65535:
    raise ValueError(f"{name}={address}: port {port} is out of range (a TCP port is "
                     f"1..65535); give the port `ray start --head` prints")
  try:
    socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
  except OSError as e:
    raise ValueError(
        f"{name}={address}: no Ray head answers there within {timeout_s:g} s "
        f"({type(e).__name__}: {e}); start the cluster first (ray start --head --port={port}) "
        f"or check the address (docs/compare.md, 'On a Ray cluster')") from None


def connect(cfg: compare_config.CompareConfig) -> str:
  """Connects this process to the Ray cluster of --ray_address (reused if already connected);
  ValueError if nothing answers at the address (`check_reachable`) or no alive node has the
  CPUs and GPUs one unit asks for (Ray would wait for one forever). Returns a line saying where
  the units run."""
  check_reachable(cfg.ray_address)
  import ray  # pylint: disable=g-import-not-at-top
  if not ray.is_initialized():
    try:
      ray.init(address=cfg.ray_address or None, runtime_env={
          "env_vars": worker_env(cfg.ray_num_gpus),
          # In each worker process before it loads a task (and with it TensorFlow and gym).
          "worker_process_setup_hook": "ccvl_tf.runtime.quiet.quiet_start"})
    except ConnectionError as e:
      cause = f" ({e.__cause__})" if e.__cause__ else ""
      raise ValueError(
          f"--ray_address={cfg.ray_address}: {e}{cause}. Start the cluster first (ray start "
          "--head), check the address, and give the driver the cluster's RAY_AUTH_MODE and "
          "RAY_AUTH_TOKEN (docs/compare.md, 'On a Ray cluster')") from None
  nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
  need = dict(CPU=float(cfg.threads_per_worker), GPU=float(cfg.ray_num_gpus))
  if not any(all(r.get(k, 0.0) >= v for k, v in need.items() if v) for r in nodes):
    have = "; ".join(f"{r.get('CPU', 0):g} CPU, {r.get('GPU', 0):g} GPU" for r in nodes)
    raise ValueError(
        f"no node of the Ray cluster ({cfg.ray_address or 'started here'}) has the "
        f"{cfg.threads_per_worker} CPU(s) (--threads_per_worker) and {cfg.ray_num_gpus:g} "
        f"GPU(s) (--ray_num_gpus) one unit asks for; its nodes have: {have or 'none alive'}")
  total = ray.cluster_resources()
  return (f"Ray cluster of {len(nodes)} node(s), {total.get('CPU', 0):g} CPU, "
          f"{total.get('GPU', 0):g} GPU; each unit {cfg.threads_per_worker} CPU, "
          f"{cfg.ray_num_gpus:g} GPU")


def run_on_ray(cfg: compare_config.CompareConfig, todo: Sequence[tuple], report,
               log: Callable[[str], None] = print) -> None:
  """Runs `todo` as Ray tasks, one per unit (the units of a training group one after the
  other); calls report(unit, row, seconds) here as tasks finish. A unit that raises stops the
  run with pool.UnitFailed naming it and its log, the tasks not yet finished cancelled; a task
  whose worker or node dies is retried by Ray (max_retries, the training resumes from its
  checkpoint)."""
  import ray  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.compare import pool  # pylint: disable=g-import-not-at-top
  from ccvl_tf.experiments.compare import units  # pylint: disable=g-import-not-at-top
  cfg = _shared_paths(cfg)
  log(f"compare: on a {connect(cfg)}.")
  task = ray.remote(run_unit_task).options(
      num_cpus=cfg.threads_per_worker, num_gpus=cfg.ray_num_gpus,
      runtime_env={"env_vars": worker_env(cfg.ray_num_gpus)})
  cfg_ref = ray.put(cfg)
  refs: Dict[object, tuple] = {}
  for group in units.training_groups(todo):
    previous: Optional[object] = None
    for unit in group:
      previous = task.remote(cfg_ref, unit, previous)
      refs[previous] = unit
  pending = list(refs)
  try:
    while pending:
      ready, pending = ray.wait(pending, num_returns=1)
      for ref in ready:
        try:
          unit, row, seconds = ray.get(ref)
        except ray.exceptions.RayTaskError as e:
          if isinstance(e.cause, pool.UnitFailed):
            raise pool.UnitFailed(str(e.cause)) from None
          raise pool.UnitFailed(pool.failure_message(
              refs[ref], f"{type(e.cause).__name__}: {e.cause}", cfg.output_dir)) from None
        except ray.exceptions.RayError as e:  # e.g. its worker or node died past the retries
          raise pool.UnitFailed(pool.failure_message(
              refs[ref], f"{type(e).__name__}: {e}", cfg.output_dir)) from None
        report(unit, row, seconds)
  except BaseException:
    for ref in pending:
      ray.cancel(ref)
    raise
