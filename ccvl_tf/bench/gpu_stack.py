"""The GPU stack a process runs on: which GPUs TensorFlow sees, the CUDA / cuDNN versions the
TensorFlow build was compiled against (`tf.sysconfig.get_build_info()`) and the ones this
process actually loaded, and whether they fit.

"Loaded" is read from the process itself, not from pip: each library's own version call
(cudaRuntimeGetVersion, cudnnGetVersion, cuDriverGetVersion) made through the entry points
TensorFlow uses (libtensorflow_framework's CUDA stubs, which load the libraries on TensorFlow's
search path and forward to them), and the file it came from (/proc/self/maps). A CUDA library
that TensorFlow found elsewhere than the pinned pip wheels (requirements-gpu.txt) therefore
shows up with its own path and version.

The rules (`stack_checks`), from NVIDIA's compatibility notes:
  * CUDA runtime: the build's major version, minor version at least the build's (minor version
    compatibility runs a 12.x build on a newer 12.y runtime, not on an older one);
  * cuDNN: the build's major version (TensorFlow 2.16 reports only the major, '8'; it was
    built and tested with 8.9, which requirements-gpu.txt pins: 8.9.7);
  * driver: supports at least the build's CUDA major version; below the build's minor version
    PTX just-in-time compilation is unavailable, so a GPU whose architecture the build carries
    only as PTX (compute_XY rather than sm_XY, e.g. an H100's sm_90 in TF 2.16) cannot run;
  * the GPU's compute capability: native code (sm_XY) in the build, or PTX of an architecture
    at most the GPU's.
"""
from __future__ import annotations

import ctypes
import dataclasses
import os
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple


def visible_gpus() -> List[object]:
  """TensorFlow's physical GPU devices (empty on a machine without one, or without the CUDA
  libraries TensorFlow needs to use it)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (after the caller's set-up)
  return tf.config.list_physical_devices("GPU")


def build_info() -> Dict[str, object]:
  """tf.sysconfig.get_build_info() as a plain dict (cuda_version '12.3', cudnn_version '8',
  cuda_compute_capabilities ['sm_50', ..., 'compute_90'], is_cuda_build, ...)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return dict(tf.sysconfig.get_build_info())


# The CUDA libraries read: name -> (the file name's pattern, the library's version call).
_LIBRARIES = {
    "cudart": (r"libcudart\.so", "cudaRuntimeGetVersion"),
    "cudnn": (r"libcudnn\.so", "cudnnGetVersion"),
    "driver": (r"libcuda\.so", "cuDriverGetVersion"),
}


def loaded_library_paths(maps_text: Optional[str] = None) -> Dict[str, str]:
  """{'cudart' | 'cudnn' | 'driver': path} of the CUDA libraries mapped into this process
  (/proc/self/maps, or `maps_text`); a library not loaded is absent."""
  if maps_text is None:
    try:
      with open("/proc/self/maps") as f:
        maps_text = f.read()
    except OSError:
      return {}
  found = {}
  for line in maps_text.splitlines():
    fields = line.split()
    base = os.path.basename(fields[-1]) if len(fields) >= 6 else ""
    for name, (pattern, _) in _LIBRARIES.items():
      if name not in found and re.match(pattern, base):
        found[name] = fields[-1]
  return found


def decode_version(name: str, value: int) -> Tuple[int, int, int]:
  """The integer a library's version call returns -> (major, minor, patch).

  CUDA runtime and driver: 1000 * major + 10 * minor (12030 -> 12.3.0). cuDNN 8:
  1000 * major + 100 * minor + patch (8907 -> 8.9.7); cuDNN 9 and later: 10000 * major + 100 *
  minor + patch (90100 -> 9.1.0)."""
  if name in ("cudart", "driver"):
    return value // 1000, (value % 1000) // 10, 0
  if value >= 90000:
    return value // 10000, (value % 10000) // 100, value % 100
  return value // 1000, (value % 1000) // 100, value % 100


def _version_through_tensorflow(name: str) -> Optional[Tuple[int, int, int]]:
  """The version call of library `name` made through TensorFlow's own entry points:
  libtensorflow_framework exports stubs of the CUDA API that load the real library the way
  TensorFlow does (its search path) and forward to it; None when it cannot be loaded."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2")
  try:
    fn = getattr(ctypes.CDLL(path), _LIBRARIES[name][1])
  except (OSError, AttributeError):
    return None
  if name == "cudnn":
    fn.restype = ctypes.c_size_t
    value = int(fn())  # 0: the stub found no cuDNN
    return decode_version(name, value) if value else None
  out = ctypes.c_int(0)
  return decode_version(name, out.value) if fn(ctypes.byref(out)) == 0 else None


def loaded_versions() -> Dict[str, Dict[str, object]]:
  """{'cudart' | 'cudnn' | 'driver': {'path' (None if not mapped), 'version' (major, minor,
  patch) or None}}: each library's version as TensorFlow's call returns it, and the file it
  came from (call after TensorFlow initialized its GPUs)."""
  versions = {name: _version_through_tensorflow(name) for name in _LIBRARIES}
  paths = loaded_library_paths()  # after the calls: they load what was not loaded yet
  return {name: {"path": paths.get(name), "version": versions[name]} for name in _LIBRARIES}


@dataclasses.dataclass(frozen=True)
class Check:
  """One line of the stack check: what was compared, whether it fits, and the numbers."""
  name: str
  ok: bool
  detail: str


def _major_minor(text: str) -> Tuple[int, int]:
  parts = [int(p) for p in re.findall(r"\d+", str(text))[:2]]
  return (parts + [0, 0])[0], (parts + [0, 0])[1]


def _fmt(version) -> str:
  return "none found" if version is None else ".".join(str(v) for v in version)


def _native(capability: Tuple[int, int], build_capabilities: Sequence[str]) -> bool:
  return f"sm_{capability[0]}{capability[1]}" in build_capabilities


def compute_capability_check(capability: Tuple[int, int],
                             build_capabilities: Sequence[str]) -> Check:
  """Whether the build runs on a GPU of `capability` (e.g. (9, 0)): native sm_XY code for it,
  else PTX (compute_XY) of an architecture at most the GPU's, compiled at start-up."""
  cc = capability[0] * 10 + capability[1]
  ptx = [int(c.split("_")[1]) for c in build_capabilities
         if c.startswith("compute_") and int(c.split("_")[1]) <= cc]
  if _native(capability, build_capabilities):
    return Check("compute capability", True, f"GPU sm_{cc}: native code in the build")
  if ptx:
    return Check("compute capability", True,
                 f"GPU sm_{cc}: run from the build's compute_{max(ptx)} PTX, compiled at "
                 f"start-up (needs a driver of at least the build's CUDA version)")
  return Check("compute capability", False,
               f"GPU sm_{cc}: the build has neither sm_{cc} nor PTX of an architecture at most "
               f"it ({', '.join(build_capabilities)})")


def _library(loaded: Dict[str, Dict[str, object]], name: str):
  """(version or None, 'its path' text) of one entry of loaded_versions()."""
  entry = loaded.get(name) or {}
  return entry.get("version"), entry.get("path") or "no file mapped"


def stack_checks(info: Dict[str, object], loaded: Dict[str, Dict[str, object]],
                 capabilities: Sequence[Tuple[int, int]]) -> List[Check]:
  """The build (`build_info()`) against the loaded libraries (`loaded_versions()`) and the
  GPUs' compute capabilities (module doc: the rules)."""
  built = info.get("cuda_compute_capabilities", ())
  cuda = _major_minor(info.get("cuda_version", "0"))
  cudnn_major = _major_minor(info.get("cudnn_version", "0"))[0]
  checks = [Check("CUDA build", bool(info.get("is_cuda_build")),
                  f"is_cuda_build={info.get('is_cuda_build')}")]
  runtime, path = _library(loaded, "cudart")
  checks.append(Check(
      "CUDA runtime", runtime is not None and runtime[0] == cuda[0] and runtime[:2] >= cuda,
      f"built with {cuda[0]}.{cuda[1]}, loaded: {_fmt(runtime)} ({path})"))
  dnn, path = _library(loaded, "cudnn")
  checks.append(Check("cuDNN", dnn is not None and dnn[0] == cudnn_major,
                      f"built with {cudnn_major}.x, loaded: {_fmt(dnn)} ({path})"))
  driver, path = _library(loaded, "driver")
  ptx_only = any(not _native(c, built) for c in capabilities)
  checks.append(Check(
      "driver", driver is not None and driver[0] >= cuda[0] and (
          not ptx_only or driver[:2] >= cuda),
      f"CUDA version of the driver: {_fmt(driver)} ({path}); the build needs {cuda[0]}.x"
      + (f", and {cuda[0]}.{cuda[1]} or newer to compile its PTX" if ptx_only else "")))
  checks.extend(compute_capability_check(c, built) for c in capabilities)
  return checks


def pip_cuda_wheels() -> Dict[str, str]:
  """{distribution: version} of the NVIDIA CUDA wheels installed in this environment
  (nvidia-*-cu12, what `make venv-gpu` installs from requirements-gpu.txt)."""
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  out = {}
  for dist in metadata.distributions():
    name = (dist.metadata["Name"] or "").lower()
    if name.startswith("nvidia-") and name.endswith("-cu12"):
      out[name] = dist.version
  return dict(sorted(out.items()))


def no_gpu_line() -> str:
  """The one line for a machine where TensorFlow sees no GPU: what was looked for, and the
  likely reason (the CUDA wheels missing, or no device / driver)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  info = build_info()
  wheels = pip_cuda_wheels()
  why = (f"the pinned CUDA wheels are installed ({len(wheels)} nvidia-*-cu12), so no device "
         f"or driver was found: check nvidia-smi and CUDA_VISIBLE_DEVICES" if wheels else
         "the CUDA wheels are not installed: on a GPU machine run `make venv-gpu` (BUILD.md)")
  return (f"gpu_check: no GPU visible to TensorFlow {tf.__version__} (built for CUDA "
          f"{info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}): nothing to check; "
          f"{why}")


def check_stack(gpus: Sequence[object], log: Callable[[str], None] = print) -> bool:
  """Logs each GPU, the CUDA wheels and every `stack_checks` line; True if all fit."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  capabilities = []
  for i, gpu in enumerate(gpus):
    details = tf.config.experimental.get_device_details(gpu)
    capabilities.append(tuple(details.get("compute_capability", (0, 0))))
    log(f"GPU {i}: {details.get('device_name', gpu.name)}, compute capability "
        f"{capabilities[-1][0]}.{capabilities[-1][1]}")
  wheels = pip_cuda_wheels()
  log("CUDA wheels: " + (", ".join(f"{k}=={v}" for k, v in wheels.items()) or
                         "none (the libraries come from the system)"))
  # TensorFlow loads cuDNN at its first convolution on a GPU.
  with tf.device("/GPU:0"):
    float(tf.reduce_sum(tf.nn.conv2d(tf.ones([1, 8, 8, 1]), tf.ones([3, 3, 1, 1]), 1, "SAME")))
  checks = stack_checks(build_info(), loaded_versions(), capabilities)
  for c in checks:
    log(f"  {'ok    ' if c.ok else 'FAILED'} {c.name}: {c.detail}")
  return all(c.ok for c in checks)
