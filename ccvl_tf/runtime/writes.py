"""A run's file writes: a failed write (disk full, a path that cannot be written) is one
`WriteFailed` whose message names the path, why, and the checkpoint a rerun resumes from; what
the failed write left (temporary files, a checkpoint's `_temp` folder) is removed first.
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
from typing import IO, Callable, Optional, Sequence

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf


class WriteFailed(OSError):
  """A run's file could not be written (disk full, a path that cannot be written). The
  message is one line naming the path, why, and the last good checkpoint."""


def _write_error_text(e: BaseException) -> str:
  """Why a write failed, in one line: an OSError's strerror, a TensorFlow error's first line
  without its '{{function_node ...}}' prefix."""
  if isinstance(e, OSError) and e.strerror:
    return e.strerror
  text = str(getattr(e, "message", None) or e).strip()
  text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", text.splitlines()[0] if text else "")
  # "<temporary file>; No space left on device [Op:SaveV2]": the file is gone, the reason stays
  text = re.sub(r"^\S*/\S*; ", "", text)
  return text or type(e).__name__


def _remove(paths) -> None:
  for p in paths:
    if os.path.isdir(p) and not os.path.islink(p):
      shutil.rmtree(p, ignore_errors=True)
    else:
      with contextlib.suppress(OSError):
        os.remove(p)


def write_failed(path: str, e: BaseException, last_good: Optional[str] = None,
                 remedy: Optional[str] = None) -> WriteFailed:
  """The WriteFailed of a write of `path` that raised `e`; `last_good`: the checkpoint a rerun
  resumes from; `remedy`: what to do instead, for a write that is not a run's."""
  resume = ("; " + remedy if remedy else
            f"; the last good checkpoint {last_good} is intact: free space (or make the path "
            f"writable) and rerun the same command to resume from it" if last_good else
            "; no checkpoint was written yet")
  return WriteFailed(f"could not write {path}: {_write_error_text(e)}{resume}")


@contextlib.contextmanager
def writing(path: str, last_good: Optional[str] = None, leftovers: Sequence[str] = (),
            remedy: Optional[str] = None):
  """Turns a failed write in the block (OSError, a TensorFlow error) into WriteFailed naming
  `path` and `last_good` (or `remedy`), after removing `leftovers` (the block's temporary files
  or directories)."""
  try:
    yield
  except WriteFailed:
    raise
  except (OSError, tf.errors.OpError) as e:
    _remove(leftovers)
    raise write_failed(path, e, last_good, remedy) from None


OUTPUT_REMEDY = ("no partial file was left: free space (or make the path writable) and rerun "
                 "the same command")


def write_atomic(path: str, write: Callable[[IO], None], newline: Optional[str] = None) -> None:
  """Writes the text file `path` through `write(f)` into `path`.tmp, then renames it over
  `path`: a failed write is a WriteFailed naming `path` and leaves neither a partial `path`
  nor the temporary."""
  with writing(path, None, [path + ".tmp"], OUTPUT_REMEDY):
    with open(path + ".tmp", "w", newline=newline) as f:
      write(f)
    os.replace(path + ".tmp", path)


def save_checkpoint(manager: tf.train.CheckpointManager, step: int) -> str:
  """manager.save(checkpoint_number=step) (the managers here keep the default name 'ckpt');
  a failed write removes what it left (ckpt-<step>_temp/, the partial ckpt-<step>.* files,
  the state file's temporary) and raises WriteFailed naming the last good checkpoint."""
  prefix = os.path.join(manager.directory, f"ckpt-{int(step)}")
  last_good = manager.latest_checkpoint
  try:
    return manager.save(checkpoint_number=step)
  except (OSError, tf.errors.OpError) as e:
    found = glob.glob(glob.escape(prefix) + "_temp*") + glob.glob(
        os.path.join(glob.escape(manager.directory), "checkpoint.tmp*"))
    if prefix != last_good:  # never a good checkpoint of the same number
      found += glob.glob(glob.escape(prefix) + ".*")
    _remove(found)
    raise write_failed(prefix, e, last_good) from None
