"""One process per run directory: an OS-level lock on `<run dir>/run.lock`, taken when a run
starts and released when it ends.

The lock is `fcntl.flock` on the open lock file, so the kernel releases it when the holding
process ends in any way, also when it is killed (kill -9): no stale lock is ever left to clean
up, and the file itself stays (removing a lock file others may hold open would let two
processes lock two different files). While it is held, the file records its holder (pid, host,
start time, command) so that a second process is refused with one line naming the directory
and the holder:

    with run_lock.hold(root_dir, "--root_dir"):
      ...  # the run

`hold` is reentrant within a process (the train_offline binary holds the lock across the run
and its results table, and each of them takes it too). On file systems without flock support
the lock cannot be taken and `hold` says so; a remote run directory (gs://) is not locked.
Processes forked while the lock is held share it (the lock belongs to the open file).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from typing import Iterator, Set

LOCK_FILENAME = "run.lock"

# The lock files this process holds (real paths).
_HELD: Set[str] = set()


class RunDirectoryInUse(ValueError):
  """Another process holds the run directory's lock; the message names the directory, the
  holder (pid, host, start time, command) and what to do."""


def _holder_text(path: str) -> str:
  """The holder recorded in the lock file `path`, in words."""
  try:
    with open(path) as f:
      info = json.loads(f.read() or "{}")
  except (OSError, ValueError):
    info = {}
  if not isinstance(info, dict) or "pid" not in info:
    return "a process that has not recorded itself yet"
  return (f"pid {info.get('pid')} on {info.get('host', '?')}, started "
          f"{info.get('started', '?')} ({info.get('command', '?')})")


def _record(fd: int) -> None:
  """Writes this process as the holder into the locked file `fd`."""
  command = shlex.join(sys.argv) if sys.argv and sys.argv[0] else sys.executable
  info = {"pid": os.getpid(), "host": socket.gethostname(),
          "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
          "command": command if len(command) <= 300 else command[:297] + "..."}
  with contextlib.suppress(OSError):  # e.g. a full disk: the lock holds without the record
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)


@contextlib.contextmanager
def hold(run_dir: str, flag: str = "--root_dir") -> Iterator[str]:
  """Holds the lock of `run_dir` (created if missing) for the block; yields the lock file's
  path.

  Raises:
    RunDirectoryInUse: another process holds it (the message names `flag`, the directory and
      the holder).
    ValueError: the directory or its lock file cannot be created or locked (e.g. read-only, or
      a file system without flock), naming `flag`, the path and why.
  """
  if "://" in str(run_dir):  # a remote run directory (gs://): no OS lock to take there
    yield ""
    return
  path = os.path.join(os.path.realpath(run_dir), LOCK_FILENAME)
  if path in _HELD:  # taken again by the process that holds it
    yield path
    return
  try:
    os.makedirs(run_dir, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
  except OSError as e:
    raise ValueError(f"{flag} {run_dir}: cannot create its lock file {path}: "
                     f"{e.strerror or e}") from None
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        raise ValueError(f"{flag} {run_dir}: cannot lock {path} ({e.strerror or e}); one "
                         f"process per run directory needs a file system with flock "
                         f"support") from None
      raise RunDirectoryInUse(
          f"{flag} {run_dir} is in use by another process: {_holder_text(path)}. One process "
          f"per run directory: wait for it to end, or give another {flag} (its lock {path} is "
          f"released when that process ends, also if it is killed)") from None
    _record(fd)
    _HELD.add(path)
    try:
      yield path
    finally:
      _HELD.discard(path)
      with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # no holder recorded while nobody holds it
  finally:
    os.close(fd)  # closing the descriptor releases the flock
