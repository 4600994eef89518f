"""Stage 1 of the replay data pipeline (docs/data.md): file access.

More in docs/data.md "Module notes", `ccvl_tf/data/replay_files.py`.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import gzip
import hashlib
import io
import json
import os
import pickle
import re
import sys
import zlib
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ccvl_tf.runtime import env_flags
from ccvl_tf.runtime import paths as run_paths
from ccvl_tf.runtime import strict_json

# TensorFlow is imported only where gs:// and ram:// paths need tf.io.gfile: it takes ~2 s to
# import (python -X importtime), and local replay files are read without it.

CACHE_ENV = "CCVL_CACHE_DIR"
# Set to 1: every file read is read on to its end on first use, a prefix read included
# (:func:`verifies_prefix`).
VERIFY_PREFIXES_ENV = env_flags.VERIFY_PREFIXES
# A prefix read of at least this share of a file's array reads on to its end on first use
# and checks its CRC-32 (the check then costs at most as much again as the read).
VERIFY_SHARE = 0.5
VERIFIED_DIR = "verified_files"
STORE_PREFIX = "$store$_"
STORE_ARRAYS = ("observation", "action", "reward", "terminal")
REQUIRED_NAMES = tuple(STORE_PREFIX + a for a in STORE_ARRAYS) + ("add_count", "invalid_range")
OPTIONAL_NAMES = ("episode_end_indices",)
METADATA_FILENAME = "ccvl_dataset.json"
CKPT_RE = re.compile(r"^(?P<name>.+)_ckpt\.(?P<suffix>\d+)\.gz$")
_NPY_MAGIC = b"\x93NUMPY"


class DatasetError(ValueError):
  """A replay directory or file that cannot be read as a Dopamine checkpoint."""


class UnreachableError(DatasetError):
  """A remote path whose file system answered with an error other than "not
  found" (e.g. gs:// without network or without permission)."""


# ----------------------------------------------------------------------- paths

# True for a path with a URL scheme (gs://bucket/..., ram://...): read through tf.io.gfile.
# Local paths are read with os/gzip.
is_remote = run_paths.is_remote


def _gfile():
  # Here: TensorFlow (see the note at the top).
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.gfile


def _tf_errors() -> tuple:
  """(tf.errors.OpError,) once TensorFlow is loaded (remote reads load it), else ()."""
  tf = sys.modules.get("tensorflow")
  errors = getattr(tf, "errors", None)
  return (errors.OpError,) if errors is not None else ()


def _tf_not_found() -> tuple:
  tf = sys.modules.get("tensorflow")
  errors = getattr(tf, "errors", None)
  return (errors.NotFoundError,) if errors is not None else ()


def not_found_errors() -> tuple:
  """What opening/reading a missing file raises (local and through tf.io.gfile)."""
  return (FileNotFoundError,) + _tf_not_found()


def read_errors() -> tuple:
  """What a failed read of a gzipped .npy raises (local and through tf.io.gfile)."""
  return (OSError, EOFError, zlib.error, ValueError, pickle.UnpicklingError) + _tf_errors()


error_text = run_paths.error_text


def _unreachable(path: str, e: BaseException) -> UnreachableError:
  return UnreachableError(run_paths.unreachable_message(path, e))


def path_exists(path: str) -> bool:
  """os.path.exists, or tf.io.gfile.exists for a remote path (raises DatasetError
  saying the path could not be reached when the file system answers with an error
  other than "not found", e.g. gs:// without network)."""
  if not is_remote(path):
    return os.path.exists(path)
  gfile = _gfile()  # imports TensorFlow: _tf_errors() below is then non-empty
  try:
    return bool(gfile.exists(path))
  except _tf_errors() as e:
    raise _unreachable(path, e) from e


def path_isdir(path: str) -> bool:
  """os.path.isdir, or (remote) exists + tf.io.gfile.isdir; see :func:`path_exists`."""
  if not is_remote(path):
    return os.path.isdir(path)
  return path_exists(path) and bool(_gfile().isdir(path))


# ValueError naming the flag unless the path is an existing directory, local or remote:
# missing, a file, or (remote) not reachable.
check_input_dir = run_paths.check_input_dir


def list_dir(path: str) -> List[str]:
  """os.listdir, or tf.io.gfile.listdir (names without the trailing "/" GCS gives
  sub-directories)."""
  if not is_remote(path):
    return os.listdir(path)
  try:
    return [n.rstrip("/") for n in _gfile().listdir(path)]
  except _tf_errors() as e:
    if isinstance(e, _tf_not_found()):
      raise DatasetError("replay directory does not exist: {}".format(path)) from e
    raise _unreachable(path, e) from e


def file_stat(path: str) -> Tuple[int, int]:
  """(size in bytes, modification time in ns; 0 where the file system has none)."""
  if not is_remote(path):
    try:
      st = os.stat(path)
    except FileNotFoundError as e:
      raise DatasetError("missing file: {}".format(path)) from e
    return int(st.st_size), int(st.st_mtime_ns)
  try:
    st = _gfile().stat(path)
  except _tf_errors() as e:
    if isinstance(e, _tf_not_found()):
      raise DatasetError("missing file: {}".format(path)) from e
    raise _unreachable(path, e) from e
  return int(st.length), int(st.mtime_nsec)


def stat_files(paths: Sequence[str], max_workers: int = 16) -> Dict[str, Tuple[int, int]]:
  """:func:`file_stat` of many files (remote ones in parallel: one request each)."""
  paths = list(paths)
  if not any(is_remote(p) for p in paths):
    return {p: file_stat(p) for p in paths}
  with concurrent.futures.ThreadPoolExecutor(max_workers=max_workers) as pool:
    return dict(zip(paths, pool.map(file_stat, paths)))


def stat_names(replay_dir: str, names: Sequence[str]) -> Dict[str, List[int]]:
  """{name: [size, mtime_ns]} (:func:`stat_files`) of files ``names`` of ``replay_dir``."""
  paths = [os.path.join(replay_dir, n) for n in names]
  stats = stat_files(paths)
  return {n: list(stats[p]) for n, p in zip(names, paths)}


@contextlib.contextmanager
def open_binary(path: str):
  """A binary file object for reading: ``open`` or a ``tf.io.gfile.GFile``."""
  if not is_remote(path):
    with open(path, "rb") as f:
      yield f
  else:
    with _gfile().GFile(path, "rb") as f:
      yield f


@contextlib.contextmanager
def open_gzip(path: str):
  """A gzip stream of ``path``, decompressed as it is read (a remote file is
  fetched only as far as the stream is read: prefixes cost prefixes)."""
  if not is_remote(path):
    with gzip.open(path, "rb") as f:
      yield f
  else:
    with open_binary(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
      yield f


# --------------------------------------------------------------- listing rules

def checkpoint_path(replay_dir: str, name: str, suffix: int) -> str:
  """Dopamine's ``_generate_filename``: ``<dir>/<name>_ckpt.<suffix>.gz``."""
  return os.path.join(replay_dir, "{}_ckpt.{}.gz".format(name, suffix))


def scan_suffixes(replay_dir: str, names: Sequence[str]) -> Tuple[List[int], Optional[str]]:
  """(the sorted suffixes of the listing ``names`` of ``replay_dir``, None), or, when a
  suffix has some files but misses a required one, (them, what ``replay_source.list_suffixes``
  raises then: the first such suffix and its missing files). A reader that lists a
  directory before it needs the suffixes keeps the complaint until it does."""
  found: Dict[int, set] = {}
  for n in names:
    m = CKPT_RE.match(n)
    if m:
      found.setdefault(int(m.group("suffix")), set()).add(m.group("name"))
  for suffix, present in sorted(found.items()):
    missing = [r for r in REQUIRED_NAMES if r not in present]
    if missing:
      return sorted(found), "suffix {} in {} is incomplete: missing {}".format(
          suffix, replay_dir, ", ".join(checkpoint_path(replay_dir, m, suffix) for m in missing))
  return sorted(found), None


def checkpoint_files(names: Sequence[str], suffix: int) -> List[str]:
  """The file names of one suffix that the reader opens: the required ones and
  the optional ones present in the listing ``names``."""
  wanted = ["{}_ckpt.{}.gz".format(n, suffix) for n in REQUIRED_NAMES]
  return wanted + [n for n in ("{}_ckpt.{}.gz".format(o, suffix) for o in OPTIONAL_NAMES)
                   if n in names]


def files_read(names: Sequence[str], suffixes: Sequence[int]) -> List[str]:
  """The names of a directory with listing ``names`` that reading ``suffixes`` opens:
  each suffix's :func:`checkpoint_files`, then ``ccvl_dataset.json`` when present."""
  out = [n for s in suffixes for n in checkpoint_files(names, s)]
  if METADATA_FILENAME in names:
    out.append(METADATA_FILENAME)
  return out


def read_metadata(replay_dir: str) -> Optional[dict]:
  """The directory's ``ccvl_dataset.json`` (None when absent); local or remote."""
  path = os.path.join(replay_dir, METADATA_FILENAME)
  if not path_exists(path):
    return None
  try:
    with open_binary(path) as f:
      return json.loads(f.read())
  except (ValueError,) + read_errors() as e:
    raise DatasetError("cannot read {}: {}".format(path, error_text(e))) from e


# ----------------------------------------------------------- gzipped .npy files

@contextlib.contextmanager
def _named_errors(path: str):
  """Turns what a failed read raises into a DatasetError naming ``path``."""
  try:
    yield
  except DatasetError:
    raise
  except not_found_errors() as e:
    raise DatasetError("missing file: {}".format(path)) from e
  except read_errors() as e:
    raise DatasetError("cannot read {} (corrupt or truncated gzip/npy?): {}: {}".format(
        path, type(e).__name__, error_text(e))) from e


class NpyStream:
  """A gzipped .npy opened for reading: its header, then its rows in order."""

  def __init__(self, f, path: str):
    head = f.read(8)  # magic (6 bytes) + format version (2)
    if head[:6] != _NPY_MAGIC:
      raise DatasetError("{} is not a numpy .npy array inside gzip".format(path))
    shape, fortran, dtype = np.lib.format._read_array_header(f, (head[6], head[7]))  # pylint: disable=protected-access
    if dtype.hasobject:
      raise DatasetError("{}: unsupported array layout".format(path))
    self.path, self._f = path, f
    self.shape, self.fortran, self.dtype = tuple(shape), bool(fortran), dtype
    self.rows = self.shape[0] if self.shape else 0
    self.row_shape = self.shape[1:]
    self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * dtype.itemsize
    # the decompressed length of the header, and of the whole file: header and array
    self.header_length = f.tell()
    self.length = f.tell() + int(np.prod(self.shape, dtype=np.int64)) * dtype.itemsize

  def _read_exactly(self, nbytes: int) -> bytes:
    buf = self._f.read(nbytes)
    if len(buf) != nbytes:
      raise EOFError("file ended after {} of {} bytes".format(len(buf), nbytes))
    return buf

  def read_all(self) -> np.ndarray:
    """The whole array (any rank, a scalar included)."""
    count = int(np.prod(self.shape, dtype=np.int64))
    flat = np.frombuffer(self._read_exactly(count * self.dtype.itemsize), self.dtype)
    return flat.reshape(self.shape, order="F" if self.fortran else "C").copy()

  def read_rows(self, n: int) -> np.ndarray:
    """The next ``n`` rows, [n, *row_shape] (read-only; C-order arrays only)."""
    if self.fortran:
      raise DatasetError("{}: unsupported array layout".format(self.path))
    return np.frombuffer(self._read_exactly(n * self.row_bytes), self.dtype).reshape(
        (n,) + self.row_shape)

  def readinto(self, dst: np.ndarray) -> None:
    """Fills the C-contiguous ``dst`` with the next ``dst.nbytes`` bytes."""
    view = memoryview(dst.reshape(-1)).cast("B")
    got = 0
    while got < view.nbytes:
      n = self._f.readinto(view[got:])
      if not n:
        raise EOFError("file ended after {} of {} bytes".format(got, view.nbytes))
      got += n


@contextlib.contextmanager
def open_npy(path: str) -> Iterator[NpyStream]:
  """A gzipped .npy (local or remote) positioned after its header; anything that
  goes wrong while it is open, including in the caller's block, becomes a
  DatasetError naming ``path`` ("missing file", "cannot read ... (corrupt or
  truncated gzip/npy?)"). On first use the file is verified when the caller's
  block ends if the block read it whole or most of it (:func:`verified_read`)."""
  opened = []

  def extent() -> Optional[Tuple[int, int]]:
    return (opened[0].header_length, opened[0].length) if opened else None

  with verified_read(path, extent) as f:
    opened.append(NpyStream(f, path))
    yield opened[0]


def read_array(path: str, max_rows: Optional[int] = None) -> Tuple[np.ndarray, int]:
  """(the array, its stored number of rows) of a gzipped .npy; with ``max_rows``
  only the first rows are decompressed (and, remote, fetched)."""
  with open_npy(path) as npy:
    if max_rows is None:
      return npy.read_all(), npy.rows
    return npy.read_rows(min(max_rows, npy.rows)).copy(), npy.rows


def stream_rows(path: str, rows: int, block_rows: int) -> Iterator[Tuple[np.ndarray, int]]:
  """Yields (block [n, *row_shape], its first row) over the first ``rows`` rows of a
  gzipped .npy, read sequentially (remote: only that prefix is fetched)."""
  with open_npy(path) as npy:
    done = 0
    while done < rows:
      n = min(block_rows, rows - done)
      yield npy.read_rows(n), done
      done += n


class _RestrictedUnpickler(pickle.Unpickler):
  """Only what a pickled ``set`` of (numpy) ints needs."""
  _ALLOWED = {("builtins", "set"), ("builtins", "frozenset"), ("builtins", "int"),
              ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
              ("numpy._core.multiarray", "scalar")}

  def find_class(self, module, name):
    if (module, name) in self._ALLOWED:
      return super().find_class(module, name)
    raise pickle.UnpicklingError("refusing to unpickle {}.{}".format(module, name))


def read_int_set(path: str) -> np.ndarray:
  """Sorted int64 [M] from a gzipped .npy array or a gzipped pickled ``set`` of ints
  (newer Dopamine's ``episode_end_indices``; nothing else is unpickled)."""
  with verified_read(path) as f:
    data = f.read()
    if data[:6] == _NPY_MAGIC:
      return np.sort(np.load(io.BytesIO(data), allow_pickle=False).astype(np.int64).reshape(-1))
    return np.array(sorted(int(x) for x in _RestrictedUnpickler(io.BytesIO(data)).load()),
                    dtype=np.int64)


# ------------------------------------------------------- verification on first use

def cache_root(cache_dir: Optional[str] = None) -> str:
  """``cache_dir``, else ``$CCVL_CACHE_DIR``, else ``$XDG_CACHE_HOME/ccvl_tf``
  (``~/.cache/ccvl_tf``): the local cache of frame stores and verified files."""
  if cache_dir:
    return os.path.expanduser(cache_dir)
  if os.environ.get(CACHE_ENV):
    return os.path.expanduser(os.environ[CACHE_ENV])
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "ccvl_tf")


def file_identity(path: str) -> List[int]:
  """What tells an unchanged file: [size, mtime_ns], locally also ctime_ns, inode and
  device (ctime cannot be set back by hand)."""
  if is_remote(path):
    return list(file_stat(path))
  try:
    st = os.stat(path)
  except FileNotFoundError as e:
    raise DatasetError("missing file: {}".format(path)) from e
  return [int(st.st_size), int(st.st_mtime_ns), int(st.st_ctime_ns), int(st.st_ino),
          int(st.st_dev)]


def _canonical(path: str) -> str:
  return str(path) if is_remote(path) else os.path.realpath(path)


def verification_record(path: str) -> str:
  """Where the verification of ``path`` is remembered."""
  key = hashlib.sha256(_canonical(path).encode()).hexdigest()[:32]
  return os.path.join(cache_root(), VERIFIED_DIR, key + ".json")


def is_verified(path: str, identity: Sequence[int]) -> bool:
  """Whether ``path`` with this identity passed :func:`verified_read` before."""
  try:
    with open(verification_record(path)) as f:
      rec = json.load(f)
  except (OSError, ValueError):
    return False
  return (isinstance(rec, dict) and rec.get("path") == _canonical(path)
          and rec.get("identity") == list(identity))


def _remember_verified(path: str, identity: Sequence[int]) -> None:
  """Records that ``path`` passed (atomically); a cache that cannot be written only
  means the next run verifies again."""
  record = verification_record(path)
  tmp = "{}.tmp-{}".format(record, os.getpid())
  try:
    os.makedirs(os.path.dirname(record), exist_ok=True)
    with open(tmp, "w") as f:
      strict_json.dump({"path": _canonical(path), "identity": list(identity)}, f)
    os.replace(tmp, record)
  except OSError:
    with contextlib.suppress(OSError):
      os.remove(tmp)


def remember_written(path: str) -> None:
  """Records ``path``, a local gzip file this process has just written whole and renamed into
  place, as verified with the identity it has now: its CRC-32 and length were computed from
  the very bytes written, so reading it back to its end would check nothing new (for a default
  dataset's final buffer that is ~7 GB of zeros inflated, about 20 s). A later change of the
  file (rewritten, truncated, copied over) changes its identity, and it is verified on its next
  read as any other file."""
  _remember_verified(path, file_identity(path))


def remember_moved(old_path: str, new_path: str) -> None:
  """Carries the verification of ``old_path`` over to ``new_path``, the same file renamed (a
  folder written under a temporary name and renamed into place): only when ``old_path`` was
  verified with exactly the identity ``new_path`` has now (size, mtime, ctime, inode, device),
  i.e. the very file, unchanged. Otherwise nothing is recorded and the file is verified on its
  next read."""
  identity = file_identity(new_path)
  if is_verified(old_path, identity):
    _remember_verified(new_path, identity)
    with contextlib.suppress(OSError):
      os.remove(verification_record(old_path))


def _read_to_end(f, path: str, length: Optional[int] = None) -> None:
  """Reads the rest of a gzip stream: gzip checks each member's CRC-32 and length
  at its end. ``length``: what the decompressed stream must hold in all (an .npy
  file: its header and array; more is corrupt too)."""
  try:
    while f.read(1 << 22):
      pass
  except (gzip.BadGzipFile, EOFError, zlib.error) as e:
    raise DatasetError("{} is corrupt: {} (its gzip checksum or length does not match "
                       "its data); replace the file".format(path, error_text(e))) from e
  if length is not None and f.tell() != length:
    raise DatasetError("{} is corrupt: {} bytes follow the stored array; replace the "
                       "file".format(path, f.tell() - length))


def verifies_prefix(read_bytes: int, array_bytes: int) -> bool:
  """Whether a first read of ``read_bytes`` of a file's ``array_bytes`` (decompressed, after
  the .npy header) reads on to the end for the CRC-32: a whole read, one of at least
  :data:`VERIFY_SHARE` of the array, or any read with ``$CCVL_VERIFY_PREFIXES=1``. A shorter
  prefix is not CRC-checked (gzip's CRC-32 covers the whole member): its .npy header, shape
  and dtype are, and inflating it checks the deflate stream's own structure."""
  if env_flags.boolean(VERIFY_PREFIXES_ENV):
    return True
  return read_bytes >= array_bytes or read_bytes >= VERIFY_SHARE * array_bytes


def _trailer_length(raw, size: int) -> Optional[int]:
  """ISIZE, the last 4 bytes of a gzip file of ``size`` bytes (the decompressed length of its
  last member, mod 2**32), read from the open binary file ``raw`` whose position is kept (a
  gzip stream reading it goes on where it was); None for a file too short to hold a trailer."""
  if size < 18:  # a 10-byte header and the 8-byte trailer
    return None
  pos = raw.tell()
  raw.seek(size - 4)
  tail = raw.read(4)
  raw.seek(pos)
  return int.from_bytes(tail, "little") if len(tail) == 4 else None


@contextlib.contextmanager
def verified_read(path: str, extent: Optional[Callable[[], Optional[Tuple[int, int]]]] = None):
  """``open_gzip(path)`` for the caller's block; if the file was not verified before
  (:func:`is_verified`), the rest of the stream is then read to its end (CRC-32 and length
  checked) and the result remembered. ``extent()``: (the .npy header's length, the whole
  decompressed length the file must have); with it, a block that read less than the share of
  the array that :func:`verifies_prefix` asks for leaves the file unverified (unread beyond
  what the caller needed, not remembered: a later whole read verifies it), and checks instead
  what costs one small read at the file's end: its gzip trailer's length (ISIZE) against the
  header's. A file cut short (or grown) ends in other bytes, which match by chance once in
  2**32; a mismatch is confirmed by reading on to the end as a whole read does (a valid file of
  several gzip members records only its last member's length), so such a file is refused,
  named, by its first read however short. Errors are DatasetErrors naming ``path``
  (:func:`_named_errors`)."""
  with _named_errors(path):
    identity = file_identity(path)  # before reading: a change while reading shows next time
    check = not is_verified(path, identity)
    with open_binary(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
      yield f
      if check:
        ext = None if extent is None else extent()
        if ext is not None:
          header, length = ext
          check = (verifies_prefix(f.tell() - header, length - header)
                   or _trailer_length(raw, identity[0]) != length % 2**32)
        if check:
          _read_to_end(f, path, None if ext is None else ext[1])
    if check:
      _remember_verified(path, identity)
