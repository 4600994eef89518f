"""A process's TensorFlow set-up for a run: the device, the CPU kernels, intra- / inter-op
threads and op determinism.

The CPU pins (the oneDNN variables and the thread count below) are applied only when no GPU is
visible: they fix CPU results, and on a GPU they would only throttle the input pipeline. The
oneDNN variables must be set before TensorFlow loads, when TensorFlow cannot yet be asked for
its devices, so `pin_cpu_kernels` decides from what the process can see without it
(`gpu_expected`: CUDA_VISIBLE_DEVICES and the NVIDIA device files /dev/nvidia0, ...). The
threads are set after TensorFlow loads, from the GPUs TensorFlow lists (`visible_gpus`), and
`device_line` (a run's first line) says which device runs and which pins are in force, naming
a start-up guess that TensorFlow contradicted (e.g. device files without a CUDA build).

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

import glob
import os
import sys
from typing import Dict, Mapping, Optional, Sequence

# oneDNN on, its instructions at most AVX-512 (no VNNI / BF16 / AMX code paths): on the 2-core
# AVX-512 EPYC where it was measured, the same kernels, and the same weights, as TensorFlow's
# default, at no measured cost; every AVX-512 CPU then runs AVX-512 code paths, though another
# CPU type may still train other weights (BUILD.md). CPUs without AVX-512 run others
# (ONEDNN_MAX_CPU_ISA=AVX2 everywhere puts them on one instruction set, for 12-18% more CPU
# time per step here).
CPU_KERNELS = {"TF_ENABLE_ONEDNN_OPTS": "1", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}


# Where the NVIDIA driver puts one file per GPU (/dev/nvidia0, /dev/nvidia1, ...).
NVIDIA_DEVICE_FILES = "/dev/nvidia[0-9]*"

# What pin_cpu_kernels decided in this process (None: it did not run): whether it expected a
# GPU and so left the oneDNN variables alone.
_PIN_DECISION: Dict[str, object] = {}


def gpu_expected(environ: Optional[Mapping[str, str]] = None,
                 device_files: Optional[Sequence[str]] = None) -> bool:
  """Whether TensorFlow will likely see a GPU, judged without loading it: CUDA_VISIBLE_DEVICES
  does not hide every device ('' or a list starting with -1 hides them all), and an NVIDIA
  device file exists (`device_files`: default, those matching NVIDIA_DEVICE_FILES). A guess:
  a CPU-only TensorFlow or missing CUDA libraries see none (`device_line` names that case)."""
  environ = os.environ if environ is None else environ
  devices = environ.get("CUDA_VISIBLE_DEVICES")
  if devices is not None:
    first = devices.split(",")[0].strip()
    if first in ("", "-1") or first.startswith("-"):
      return False
  files = glob.glob(NVIDIA_DEVICE_FILES) if device_files is None else device_files
  return bool(files)


def pin_cpu_kernels(gpu: Optional[bool] = None) -> Dict[str, str]:
  """Sets each variable of CPU_KERNELS the environment does not set already (an explicit
  setting wins), unless a GPU is expected (`gpu`; None: `gpu_expected()`), where it sets none;
  returns the values in force. TensorFlow and oneDNN read them once, when TensorFlow loads, so
  this must run before: RuntimeError otherwise, unless every variable was already set (by an
  earlier call, or by a wrapper that imports TensorFlow first)."""
  gpu = gpu_expected() if gpu is None else bool(gpu)
  _PIN_DECISION["gpu_expected"] = gpu
  if gpu:
    return {name: os.environ[name] for name in CPU_KERNELS if name in os.environ}
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


def visible_gpus() -> list:
  """The names of the GPUs TensorFlow lists ('/physical_device:GPU:0', ...; loads TensorFlow,
  without starting its runtime)."""
  # Here: TensorFlow loads after pin_cpu_kernels (see cpu_kernels_in_force).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return [d.name for d in tf.config.list_physical_devices("GPU")]


def gpu_visible() -> bool:
  """Whether TensorFlow sees at least one GPU."""
  return bool(visible_gpus())


def configure_tensorflow(threads: int, deterministic: bool, log=None,
                         gpus: Optional[Sequence[str]] = None) -> Dict[str, object]:
  """Sets TensorFlow's intra/inter-op threads (0: TensorFlow's default) where no GPU is
  visible (`gpus`: the GPUs TensorFlow lists, None: `visible_gpus()`; with one, TensorFlow's
  default threads stay) and op determinism for this process, if TensorFlow's runtime has not
  started yet; returns what is in force (for the result rows)."""
  # Here: TensorFlow loads after pin_cpu_kernels (see cpu_kernels_in_force).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = visible_gpus() if gpus is None else list(gpus)
  try:
    if not gpus:
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


def device_line(gpus: Sequence[str], threads: int, deterministic: bool = False,
                kernels: Optional[str] = None, gpu_was_expected: Optional[bool] = None) -> str:
  """A run's first line: which device trains and which CPU pins are in force, e.g.
  'device: CPU (no GPU visible), 2 TensorFlow threads (--tf_threads); CPU kernels: oneDNN on,
  ONEDNN_MAX_CPU_ISA=AVX512_CORE.' or 'device: 1 GPU (/physical_device:GPU:0), CPU pins off
  ...'. `gpus`: the GPUs TensorFlow lists; `threads`: the intra-op threads in force (0:
  TensorFlow's default); `kernels`: cpu_kernels_in_force() (default: asked here);
  `gpu_was_expected`: pin_cpu_kernels' start-up guess (default: this process's, if it ran)."""
  kernels = cpu_kernels_in_force() if kernels is None else kernels
  if gpu_was_expected is None:
    gpu_was_expected = _PIN_DECISION.get("gpu_expected")
  determinism = ", op determinism on" if deterministic else ""
  if gpus:
    note = ""
    if gpu_was_expected is False:
      note = (" (the oneDNN variables were set at start-up, when no GPU was expected: they "
              "affect the CPU ops only)")
    return (f"device: {len(gpus)} GPU ({', '.join(gpus)}), CPU pins off: TensorFlow's default "
            f"threads, not --tf_threads{note}{determinism}; CPU kernels: {kernels}.")
  note = ""
  if gpu_was_expected:
    note = (f"; a GPU was expected at start-up ({NVIDIA_DEVICE_FILES} present), so the oneDNN "
            f"variables were left unset: set CUDA_VISIBLE_DEVICES= (or "
            + " ".join(f"{k}={v}" for k, v in CPU_KERNELS.items()) + ") to pin them")
  return (f"device: CPU (no GPU visible{note}), {threads or 'the default number of'} "
          f"TensorFlow threads (--tf_threads){determinism}; CPU kernels: {kernels}.")


def float16_cpu_problem(gpus: Sequence[str], environ: Optional[Mapping[str, str]] = None,
                        onednn_on: Optional[bool] = None) -> Optional[str]:
  """Why float16 compute cannot run here, or None: without a GPU, oneDNN (on) with its
  instruction set capped below float16 kernels (ONEDNN_MAX_CPU_ISA=AVX512_CORE, the pin of
  CPU_KERNELS, or lower) has no float16 matrix product and aborts the process on the first
  one. `onednn_on`: default, whether this process's TensorFlow runs oneDNN."""
  if gpus:
    return None
  environ = os.environ if environ is None else environ
  if onednn_on is None:
    onednn_on = cpu_kernels_in_force().startswith("oneDNN on")
  cap = environ.get("ONEDNN_MAX_CPU_ISA", "ALL").upper()
  if not onednn_on or cap == "ALL" or "FP16" in cap or "AMX" in cap:
    return None
  return (f"float16 on a CPU with oneDNN capped at ONEDNN_MAX_CPU_ISA={cap} has no float16 "
          f"kernels (oneDNN aborts the process); float16 is for GPUs (on this project's CPU it "
          f"measured 55-75x slower than float32, BUILD.md): use bfloat16, or set "
          f"ONEDNN_MAX_CPU_ISA=ALL or TF_ENABLE_ONEDNN_OPTS=0 to run it anyway")
