"""A process's TensorFlow set-up for a run: the CPU kernels, intra- / inter-op threads and op
determinism.

What makes one seed train different networks on different machines, measured with
tools/determinism_cost.py (BUILD.md, "What is and is not bit-reproducible"):
  * the intra-op thread count (TensorFlow's default: the number of cores the process may use).
    The runs that report numbers fix it: compare.py's units (--threads_per_worker),
    train_offline.py (--tf_threads), the ablation's workers (`configure_tensorflow`);
  * whether TensorFlow's oneDNN kernels run (its default follows the CPU: on with
    AVX512_VNNI / AVX512_BF16 / AMX, off otherwise), and which instruction set oneDNN's
    kernels use (chosen at run time from the CPU; also behind TensorFlow's own matrix products
    with oneDNN off). train_offline.py fixes both (`pin_cpu_kernels`, before TensorFlow loads).
"""
from __future__ import annotations

import os
import sys
from typing import Dict

# oneDNN on, its instructions at most AVX-512 (no VNNI / BF16 / AMX code paths): on the 2-core
# AVX-512 EPYC where it was measured, the same kernels, and the same weights, as TensorFlow's
# default, at no measured cost; every AVX-512 CPU then runs AVX-512 code paths, though another
# CPU type may still train other weights (BUILD.md). CPUs without AVX-512 run others
# (ONEDNN_MAX_CPU_ISA=AVX2 everywhere puts them on one instruction set, for 12-18% more CPU
# time per step here).
CPU_KERNELS = {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}


def pin_cpu_kernels() -> Dict[str, str]:
  """Sets each variable of CPU_KERNELS the environment does not set already (an explicit
  setting wins); returns the values in force. TensorFlow and oneDNN read them once, when
  TensorFlow loads, so this must run before: RuntimeError otherwise, unless every variable was
  already set (by an earlier call, or by a wrapper that imports TensorFlow first)."""
  if all(name in os.environ for name in CPU_KERNELS):
    return {name: os.environ[name] for name in CPU_KERNELS}
  if "tensorflow" in sys.modules:
    raise RuntimeError("pin_cpu_kernels() must run before TensorFlow is imported (it sets "
                       + ", ".join(CPU_KERNELS) + ")")
  for name, value in CPU_KERNELS.items():
    os.environ.setdefault(name, value)
  return {name: os.environ[name] for name in CPU_KERNELS}


def cpu_kernels_in_force() -> str:
  """'oneDNN on, ONEDNN_MAX_CPU_ISA=...' as this process runs (for the log)."""
  # Here: TensorFlow loads after pin_cpu_kernels has set its variables (this module is
  # imported before TensorFlow, to pin them).
  from tensorflow.python.util import _pywrap_util_port  # pylint: disable=g-import-not-at-top
  onednn = "on" if _pywrap_util_port.IsMklEnabled() else "off"
  return f"oneDNN {onednn}, ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}"


def configure_tensorflow(threads: int, deterministic: bool, log=None) -> Dict[str, object]:
  """Sets TensorFlow's intra/inter-op threads (0: TensorFlow's default) and op determinism
  for this process, if TensorFlow's runtime has not started yet; returns what is in force (for
  the result rows)."""
  # Here: TensorFlow loads after pin_cpu_kernels (see cpu_kernels_in_force).
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
