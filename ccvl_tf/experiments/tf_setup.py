"""A process's TensorFlow set-up for a run: intra- / inter-op threads and op determinism.

The trained weights depend on the intra-op thread count (TensorFlow's default is the number of
cores the process may use), so the runs that report numbers fix it: compare.py's units
(--threads_per_worker), train_offline.py (--tf_threads), the ablation's workers. Measured with
tools/determinism_cost.py (BUILD.md, "What is and is not bit-reproducible").
"""
from __future__ import annotations

from typing import Dict


def configure_tensorflow(threads: int, deterministic: bool, log=None) -> Dict[str, object]:
  """Sets TensorFlow's intra/inter-op threads (0: TensorFlow's default) and op determinism
  for this process, if TensorFlow's runtime has not started yet; returns what is in force (for
  the result rows)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
  except RuntimeError:
    if log is not None and tf.config.threading.get_intra_op_parallelism_threads() != threads:
      log(f"TensorFlow was already running in this process; its thread count "
          f"({tf.config.threading.get_intra_op_parallelism_threads() or 'default'}) stays, "
          f"so scores may differ from a run with {threads} thread(s)")
  if deterministic:
    tf.config.experimental.enable_op_determinism()
  return {"tf_threads": int(tf.config.threading.get_intra_op_parallelism_threads()),
          "deterministic": bool(deterministic)}
