"""The checks of the paths a binary is given, before anything is read or written: an output
directory (or file) that can be created and written, an input directory that exists. Each is
one ValueError naming the flag, the path and what is wrong; every binary's output flags go
through `config_flags.from_flags`, which calls these (the settings declared `output="dir"` /
`"file"`). Input paths may be remote (gs://, ram://): `exists`, `isdir`, `isfile`,
`read_text` and `read_bytes` read those through tf.io.gfile and local ones with `os` and
`open`. TensorFlow is imported only inside them, for a remote path (config_flags imports this
module, and importing TensorFlow takes seconds).
"""
from __future__ import annotations

import os
import sys


def _refuse_remote_output(path: str, flag: str) -> None:
  """Outputs are written with local file operations (json, csv, PNG, renames into place), so
  a remote output path (gs://, ram://) is refused before anything runs, not half-written."""
  if "://" in path:
    raise ValueError(f"{flag} {path} is a remote path; outputs must go to a local directory "
                     f"(inputs may be remote): write locally, then copy the directory "
                     f"(e.g. gsutil -m cp -r)")


def check_output_dir(path: str, flag: str = "--root_dir") -> None:
  """ValueError naming `flag` unless `path` is (or can be created as) a writable local
  directory: not a file, not under a file, and writable where it exists (or its nearest
  existing parent is)."""
  if not path:
    raise ValueError(f"{flag} must be a directory path, got {path!r}")
  _refuse_remote_output(path, flag)
  probe = os.path.abspath(path)
  if os.path.exists(probe) and not os.path.isdir(probe):
    raise ValueError(f"{flag} {path} is a file, not a directory")
  while not os.path.exists(probe):
    parent = os.path.dirname(probe)
    if parent == probe:
      break
    probe = parent
  if not os.path.isdir(probe):
    raise ValueError(f"{flag} {path}: {probe} is a file, so the directory cannot be created")
  if not os.access(probe, os.W_OK | os.X_OK):
    why = "is on a read-only file system" if _read_only(probe) else "is not writable"
    raise ValueError(f"{flag} {path}: {probe} {why}")
  _check_name_lengths(path, flag, probe)


def _read_only(path: str) -> bool:
  """Whether `path` lies on a file system mounted read-only."""
  try:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
  except OSError:
    return False


def _check_name_lengths(path: str, flag: str, existing: str) -> None:
  """ValueError naming `flag` when a component of `path`, or the whole of it, is longer than
  the file system of `existing` (its nearest existing directory) allows."""
  def limit(name: str, default: int) -> int:
    try:
      return int(os.pathconf(existing, name))
    except (OSError, ValueError):
      return default
  name_max, path_max = limit("PC_NAME_MAX", 255), limit("PC_PATH_MAX", 4096)
  full = os.path.abspath(path)
  for part in full.split(os.sep):
    if len(os.fsencode(part)) > name_max:
      shown = part if len(part) <= 40 else part[:37] + "..."
      raise ValueError(f"{flag}: the path component {shown!r} is {len(os.fsencode(part))} "
                       f"bytes long, longer than the file system allows ({name_max}); use a "
                       f"shorter name")
  if len(os.fsencode(full)) >= path_max:
    raise ValueError(f"{flag}: the path is {len(os.fsencode(full))} bytes long, longer than the "
                     f"file system allows ({path_max - 1}); use a shorter path")


def check_output_file(path: str, flag: str) -> None:
  """ValueError naming `flag` unless `path` can be written as a file: not a directory, and
  its directory one `check_output_dir` accepts."""
  if not path:
    raise ValueError(f"{flag} must be a file path, got {path!r}")
  _refuse_remote_output(path, flag)
  if os.path.isdir(path):
    raise ValueError(f"{flag} {path} is a directory, not a file")
  if path.endswith(("/", os.sep)):
    raise ValueError(f"{flag} {path} ends with '/', so it names a directory, not a file; give "
                     f"the file's path (e.g. {path.rstrip('/' + os.sep) or '.'}/out.json)")
  parent = os.path.dirname(os.path.abspath(path))
  if os.path.exists(parent) and not os.path.isdir(parent):
    raise ValueError(f"{flag} {path}: {parent} is a file, so the directory cannot be created")
  check_output_dir(parent, flag)
  _check_name_lengths(path, flag, parent)


def check_input_dir(path: str, flag: str, expected: str = "") -> None:
  """ValueError naming `flag` unless `path` is an existing directory, local or remote; the
  message says whether it is missing, a file or (remote) not reachable (`expected`: what the
  directory should hold)."""
  hint = f" (expected {expected})" if expected else ""
  if not path:
    raise ValueError(f"{flag} must be a directory path{hint}, got {path!r}")
  try:
    if isdir(path):
      return
    what = "is a file, not a directory" if exists(path) else "does not exist"
  except UnreachableError as e:
    raise ValueError(f"{flag} {e}") from e
  raise ValueError(f"{flag} {path} {what}{hint}")


# ------------------------------------------------------------ reading local or remote inputs

class UnreachableError(ValueError):
  """A remote path whose file system answered with an error other than "not found" (e.g.
  gs:// without network or without permission)."""


def is_remote(path) -> bool:
  """True for a path with a URL scheme (gs://bucket/..., ram://...): read through
  tf.io.gfile."""
  return "://" in str(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (remote paths only)
  return tf.io.gfile


def _tf_errors():
  """(tf.errors.NotFoundError, tf.errors.OpError); TensorFlow is loaded (by `_gfile`)."""
  errors = sys.modules["tensorflow"].errors
  return errors.NotFoundError, errors.OpError


def error_text(e: BaseException) -> str:
  """The first line of an exception's message (TensorFlow's append long context)."""
  text = str(getattr(e, "message", None) or e).strip()
  return text.splitlines()[0] if text else type(e).__name__


def unreachable_message(path: str, e: BaseException) -> str:
  """What a remote path's file system answering `e` (not "not found") means."""
  return (f"could not reach {path} ({type(e).__name__}: {error_text(e)}); a gs:// path needs "
          f"network access and, for a non-public bucket, Google credentials")


def _unreachable(path: str, e: BaseException) -> UnreachableError:
  return UnreachableError(unreachable_message(path, e))


def exists(path: str) -> bool:
  """os.path.exists, or tf.io.gfile.exists for a remote path (UnreachableError when its file
  system answers with an error other than "not found")."""
  if not is_remote(path):
    return os.path.exists(path)
  gfile = _gfile()
  try:
    return bool(gfile.exists(path))
  except _tf_errors()[1] as e:
    raise _unreachable(path, e) from e


def isdir(path: str) -> bool:
  """os.path.isdir, or (remote) `exists` and tf.io.gfile.isdir."""
  if not is_remote(path):
    return os.path.isdir(path)
  return exists(path) and bool(_gfile().isdir(path))


def isfile(path: str) -> bool:
  """os.path.isfile, or (remote) `exists` and not tf.io.gfile.isdir."""
  if not is_remote(path):
    return os.path.isfile(path)
  return exists(path) and not _gfile().isdir(path)


def read_bytes(path: str) -> bytes:
  """The whole file at `path`, local or remote. A remote read that fails raises an OSError as
  a local one does (FileNotFoundError for a missing file), so callers catch one kind."""
  if not is_remote(path):
    with open(path, "rb") as f:
      return f.read()
  gfile = _gfile()
  not_found, op_error = _tf_errors()
  try:
    with gfile.GFile(path, "rb") as f:
      return f.read()
  except not_found as e:
    raise FileNotFoundError(f"{path} does not exist") from e
  except op_error as e:
    raise OSError(str(_unreachable(path, e))) from e


def read_text(path: str) -> str:
  """The file at `path` (local or remote) decoded as UTF-8; errors as `read_bytes`'s, and
  UnicodeDecodeError."""
  if not is_remote(path):
    with open(path) as f:
      return f.read()
  return read_bytes(path).decode("utf-8")
