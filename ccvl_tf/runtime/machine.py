"""The machine a training segment runs on, as a run records it (checkpoints/machines.json).

Two CPU types train different weights from one seed under the same code, data and settings
(oneDNN's kernels differ between them even at one instruction-set cap; docs/results/
reproducibility.md), and at the demo's length that difference is as large as a new seed's. So a
run names its machine: the CPU's model and vendor, the instruction-set extensions that decide
which oneDNN kernels can run, the kernel settings in force, the GPUs TensorFlow sees, and the
versions of the packages that compute. No host name, user or path.
"""
from __future__ import annotations

import os
import platform
from typing import Dict, List, Optional

# The x86 extensions that change which oneDNN kernels a CPU runs (/proc/cpuinfo's names).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                "amx_bf16")
KERNEL_VARIABLES = ("TF_ENABLE_ONEDNN_OPTS", "ONEDNN_MAX_CPU_ISA")


def parse_cpuinfo(text: str) -> Dict[str, object]:
  """{'model', 'vendor', 'kernel_flags'} from the text of /proc/cpuinfo (its first processor;
  the flags in KERNEL_FLAGS it lists, in that order); a field it lacks is None."""
  fields: Dict[str, str] = {}
  for line in text.splitlines():
    if not line.strip():
      if fields:
        break  # the first processor's block is enough: a machine's cores are alike
      continue
    key, sep, value = line.partition(":")
    if sep:
      fields.setdefault(key.strip(), value.strip())
  flags = set(fields.get("flags", "").split())
  return {"model": fields.get("model name"), "vendor": fields.get("vendor_id"),
          "kernel_flags": [f for f in KERNEL_FLAGS if f in flags] if "flags" in fields else None}


def cpu(cpuinfo_path: str = "/proc/cpuinfo") -> Dict[str, object]:
  """The CPU as parse_cpuinfo reads it, or (no /proc/cpuinfo: macOS, Windows) the model
  Python's platform module gives, its flags None."""
  try:
    with open(cpuinfo_path) as f:
      return parse_cpuinfo(f.read())
  except OSError:
    return {"model": platform.processor() or None, "vendor": None, "kernel_flags": None}


def _gpus() -> List[str]:
  """The GPUs TensorFlow lists, by model name where it gives one (TensorFlow is loaded by
  then: the caller trains with it)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  out = []
  for device in tf.config.list_physical_devices("GPU"):
    try:
      name = tf.config.experimental.get_device_details(device).get("device_name")
    except (ValueError, RuntimeError):
      name = None
    out.append(name or device.name)
  return out


def record(cpuinfo_path: str = "/proc/cpuinfo") -> Dict[str, object]:
  """This machine: {'cpu', 'logical_cpus', 'kernels' (KERNEL_VARIABLES as set, 'unset' if
  not), 'gpus', 'versions' (python, numpy, tensorflow), 'platform'}."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return {"cpu": cpu(cpuinfo_path), "logical_cpus": os.cpu_count(),
          "kernels": {v: os.environ.get(v, "unset") for v in KERNEL_VARIABLES},
          "gpus": _gpus(),
          "versions": {"python": platform.python_version(), "numpy": np.__version__,
                       "tensorflow": tf.__version__},
          "platform": f"{platform.system()} {platform.machine()}"}


def describe(entry: Optional[Dict[str, object]]) -> str:
  """One line naming a record's CPU and kernels, for logs and tables: 'Intel(R) Xeon(R)
  Processor (avx2, avx512f; ONEDNN_MAX_CPU_ISA=AVX512_CORE)', GPUs appended when any."""
  if not entry:
    return "unrecorded"
  c = entry.get("cpu") or {}
  flags = c.get("kernel_flags")
  if flags is None:
    flags_text = "flags unknown"
  else:
    flags_text = ", ".join(flags) or "no AVX2 or later"
  isa = (entry.get("kernels") or {}).get("ONEDNN_MAX_CPU_ISA", "unset")
  gpus = entry.get("gpus") or []
  return (f"{c.get('model') or 'an unnamed CPU'} ({flags_text}; ONEDNN_MAX_CPU_ISA={isa})"
          + (f", GPUs: {', '.join(gpus)}" if gpus else ""))
