"""A quiet start for the binaries: only the project's own lines unless asked otherwise.

Importing TensorFlow, TF-Agents and ale-py prints a dozen lines a user cannot act on: CUDA
factory registration errors and oneDNN notices (TensorFlow's C++ logging), the Gym
deprecation banner (TF-Agents imports gym, whose `gym_notices` prints to stderr), AutoGraph's
SyntaxWarnings about TF-Agents' own `x is ()` checks, and ALE's "A.L.E: ... [Powered by
Stella]" banner. `quiet_start()` (called by every binary before TensorFlow is imported)
silences exactly those:
  * TF_CPP_MIN_LOG_LEVEL=3 unless the environment already sets it;
  * the gym notice is swallowed while gym is first imported (stderr redirected for that import
    only);
  * AutoGraph's `"is" with a literal` SyntaxWarnings are filtered;
  * ale-py's logger is set to errors only (`ale_py.ALEInterface.setLoggerMode`).
Set CCVL_VERBOSE=1 to keep all of it (BUILD.md, "A quiet start"); an explicit
TF_CPP_MIN_LOG_LEVEL in the environment is respected. `notices_hidden()` drops, for one block,
the log records of known notices (every policy export's, EXPORT_NOTICES), in the library's
calls as in the binaries'.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import warnings

import ccvl_tf
from ccvl_tf.runtime import env_flags


def verbose_requested() -> bool:
  """CCVL_VERBOSE on (env_flags: a value neither on nor off is refused later, when the
  binary's flags are read; here, before TensorFlow loads, it counts as off)."""
  return env_flags.boolean(env_flags.VERBOSE, strict=False)


def quiet_start() -> None:
  """Silences the third-party start-up noise (see the module doc); no-op with CCVL_VERBOSE=1."""
  if verbose_requested():
    return
  if "tensorflow" not in sys.modules and not ccvl_tf.USER_SET_TF_LOG_LEVEL:
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  warnings.filterwarnings("ignore", message=r'"is( not)?" with a literal',
                          category=SyntaxWarning)
  warnings.filterwarnings("ignore", category=DeprecationWarning)
  try:
    with contextlib.redirect_stderr(io.StringIO()):  # here: its banner printed on import
      import gym  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
  except Exception:  # pylint: disable=broad-except
    pass  # gym missing or broken: the real import later reports it
  try:  # here: after TF_CPP_MIN_LOG_LEVEL and the filters above are set
    import ale_py  # pylint: disable=g-import-not-at-top
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
  except Exception:  # pylint: disable=broad-except
    pass


# What every policy export logs through absl and no user can act on: TF-Agents' PolicySaver
# says distribution() is not saved (by design: exported policies serve action() only) and
# TensorFlow says the signature's argument names ('0/step_type') are sanitized.
EXPORT_NOTICES = (r"Could not serialize policy\.distribution\(\)",
                  r"is not a valid tf\.function parameter name\. Sanitizing")


class _Drop(logging.Filter):
  """Drops the log records whose message matches one of `patterns`."""

  def __init__(self, patterns):
    super().__init__()
    self._patterns = [re.compile(p) for p in patterns]

  def filter(self, record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not any(p.search(message) for p in self._patterns)


@contextlib.contextmanager
def notices_hidden(patterns=EXPORT_NOTICES, logger: str = "absl"):
  """Within the block, the `logger`'s records matching `patterns` are dropped (every other
  record passes); nothing is dropped with CCVL_VERBOSE=1. For the library's calls as much as
  the binaries': a Python user sees them too."""
  if verbose_requested():
    yield
    return
  drop = _Drop(patterns)
  target = logging.getLogger(logger)
  target.addFilter(drop)
  try:
    yield
  finally:
    target.removeFilter(drop)
