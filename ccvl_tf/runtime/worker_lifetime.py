"""Worker processes that do not outlive their parent.

`concurrent.futures.ProcessPoolExecutor` workers (compare.py's, ablate.py's) keep training when
their parent is killed with SIGKILL (or dies of an out-of-memory kill): the parent never gets
to shut the pool down, and the orphans hold the CPU cores and write into the output directory
a resumed run is about to use. `die_with_parent()`, called first in a worker's initializer,
asks Linux to send the worker SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG) and exits at
once if the parent is already gone. Elsewhere (macOS, no libc) it does nothing and says so in
its return value.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGTERM) -> bool:
  """Makes this process receive `sig` when its parent exits; returns True if that is set up.

  `parent_pid`: the pid the caller expects as parent (a spawned worker's initializer gets it as
  an argument); if the process's parent is already another one (the expected parent died before
  the call), the process exits with status 1.
  """
  if not sys.platform.startswith("linux"):
    return False
  try:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
      return False
  except (OSError, AttributeError):
    return False
  if parent_pid is not None and os.getppid() != parent_pid:
    os._exit(1)  # the parent died before the request took effect  # pylint: disable=protected-access
  return True
