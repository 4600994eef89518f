"""Every replay file that is read is verified on first use (gzip CRC-32 and length), the
result is remembered in the local cache, and a corrupt file is refused naming it.

The corrupt copies flip bytes of the real testdata files: either inside the compressed
stream of the observation file (an offset where the flipped stream still inflates to the
right length, as a bit flip on disk can), or in a copy stored with uncompressed deflate
blocks, where a flipped byte is a flipped value that every other check accepts.
"""
import gzip
import os
import shutil
import struct
import zlib

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import replay_files
from ccvl_tf.data.replay_files import DatasetError
from ccvl_tf.data.frame_store import FrameStore

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
_STORED_BLOCK = 65535
# An offset in $store$_observation_ckpt.0.gz where flipping 4 bytes leaves a stream that
# inflates to the full length with other frames (found once by trying offsets).
OBS_FLIP_OFFSET = 2994


@pytest.fixture
def cache(tmp_path, monkeypatch):
  root = tmp_path / "cache"
  monkeypatch.setenv(replay_files.CACHE_ENV, str(root))
  return root


def copy_testdata(tmp_path):
  d = tmp_path / "replay_logs"
  shutil.copytree(TESTDATA, d)
  return str(d)


def stored_gzip(data: bytes) -> bytes:
  """A gzip member of ``data`` in stored (uncompressed) deflate blocks."""
  out = bytearray(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
  for start in range(0, len(data), _STORED_BLOCK):
    chunk = data[start:start + _STORED_BLOCK]
    final = start + _STORED_BLOCK >= len(data)
    out += bytes([1 if final else 0]) + struct.pack("<HH", len(chunk), len(chunk) ^ 0xFFFF)
    out += chunk
  return bytes(out + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF))


def flip_stored_value(path: str, slot: int, byte: int, mask: int) -> None:
  """Rewrites ``path`` in stored blocks, then XORs byte ``byte`` of element ``slot`` of
  its array with ``mask`` in the file itself (the trailer keeps the original CRC)."""
  with gzip.open(path, "rb") as f:
    raw = f.read()
  arr = np.load(gzip.open(path, "rb"))
  data_start = len(raw) - arr.nbytes
  pos = data_start + slot * arr.itemsize + byte
  blob = bytearray(stored_gzip(raw))
  blob[10 + 5 * (pos // _STORED_BLOCK + 1) + pos] ^= mask
  with open(path, "wb") as f:
    f.write(blob)


def store_arrays(store):
  return {n: getattr(store, n).copy() for n in ("frames", "action", "reward", "terminal",
                                                "valid")}


# (file, slot, byte of the element, XOR mask): each flip keeps the value one the reader's
# value checks accept (a pixel, action 0<->1, reward 0 -> 0.5, terminal 0 <-> 1).
FLIPS = {
    "observation": ("$store$_observation_ckpt.0.gz", 200, 3000, 0xFF),
    "action": ("$store$_action_ckpt.1.gz", 300, 0, 0x01),
    "reward": ("$store$_reward_ckpt.2.gz", 400, 3, 0x3F),
    "terminal": ("$store$_terminal_ckpt.0.gz", 500, 0, 0x01),
}


@pytest.mark.parametrize("subset", ["all", "1%"])
@pytest.mark.parametrize("kind", sorted(FLIPS))
def test_a_flipped_byte_in_any_replay_file_is_refused_naming_it(tmp_path, cache, kind, subset):
  d = copy_testdata(tmp_path)
  name, slot, byte, mask = FLIPS[kind]
  path = os.path.join(d, name)
  flip_stored_value(path, slot, byte, mask)
  with pytest.raises(DatasetError) as e:
    FrameStore.from_replay(d, subset, num_actions=4)
  msg = str(e.value)
  assert path in msg and "is corrupt" in msg and "CRC" in msg, msg
  assert len(msg.splitlines()) == 1


def test_stored_copy_without_a_flip_loads_the_same_store(tmp_path, cache):
  """The stored-block rewrite alone is a valid file: only the flip makes it corrupt."""
  d = copy_testdata(tmp_path)
  for name, _, _, _ in FLIPS.values():
    path = os.path.join(d, name)
    with gzip.open(path, "rb") as f:
      raw = f.read()
    with open(path, "wb") as f:
      f.write(stored_gzip(raw))
  got = store_arrays(FrameStore.from_replay(d, "all", num_actions=4))
  ref = store_arrays(FrameStore.from_replay(TESTDATA, "all", num_actions=4))
  for k in ref:
    np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_flipped_bytes_in_the_compressed_observation_stream_are_refused(tmp_path, cache):
  """Four bytes flipped inside the compressed observation file."""
  d = copy_testdata(tmp_path)
  path = os.path.join(d, "$store$_observation_ckpt.0.gz")
  with open(path, "r+b") as f:
    f.seek(OBS_FLIP_OFFSET)
    b = f.read(4)
    f.seek(OBS_FLIP_OFFSET)
    f.write(bytes(x ^ 0xFF for x in b))
  for subset in ("all", "1%"):
    with pytest.raises(DatasetError, match=r"\$store\$_observation_ckpt\.0\.gz is corrupt: "
                                           r"CRC check failed"):
      FrameStore.from_replay(d, subset, num_actions=4)


def test_verification_is_remembered_and_redone_when_the_file_changes(tmp_path, cache,
                                                                     monkeypatch):
  d = copy_testdata(tmp_path)
  calls = []
  real = replay_files._read_to_end  # pylint: disable=protected-access

  def counted(f, path, length=None):
    calls.append(os.path.basename(path))
    return real(f, path, length)

  monkeypatch.setattr(replay_files, "_read_to_end", counted)
  msgs = []
  FrameStore.from_replay(d, "all", num_actions=4, progress=msgs.append)
  assert len(calls) == 18  # 6 files x 3 suffixes, each verified once
  assert any(m.startswith("Verifying 3 observation file(s) on first use") for m in msgs), msgs
  records = os.listdir(cache / replay_files.VERIFIED_DIR)
  assert len(records) == 18
  # A second load reads only what it needs.
  del calls[:], msgs[:]
  FrameStore.from_replay(d, "all", num_actions=4, progress=msgs.append)
  assert calls == [] and not any(m.startswith("Verifying") for m in msgs)
  # A file written again (same bytes, new mtime and ctime) is verified again; so is a
  # corrupted one, which is then refused.
  name, slot, byte, mask = FLIPS["reward"]
  flip_stored_value(os.path.join(d, name), slot, byte, mask)
  with pytest.raises(DatasetError, match=r"reward_ckpt\.2\.gz is corrupt"):
    FrameStore.from_replay(d, "all", num_actions=4)
  assert calls == [name]


def test_files_the_writer_wrote_are_not_read_again_until_they_change(tmp_path, cache,
                                                                     monkeypatch):
  """The writer records each file it wrote as verified (its CRC-32 came from the bytes it
  wrote), so the first load reads only what it needs; a file changed after the write (here
  one byte flipped in place: same size, new mtime and ctime) is verified on its next read and
  refused."""
  from ccvl_tf.data import replay_writer  # pylint: disable=g-import-not-at-top
  d = str(tmp_path / "written")
  w = replay_writer.DopamineReplayWriter(d, replay_capacity=64)
  for i in range(40):
    w.add(np.full((84, 84), i + 1, np.uint8), i % 3, 0.0, i % 10 == 9)
  assert w.close() == [0]
  calls = []
  real = replay_files._read_to_end  # pylint: disable=protected-access
  monkeypatch.setattr(replay_files, "_read_to_end",
                      lambda f, path, length=None: (calls.append(os.path.basename(path)),
                                                    real(f, path, length))[1])
  msgs = []
  store = FrameStore.from_replay(d, num_actions=3, progress=msgs.append)
  assert calls == [] and not any(m.startswith("Verifying") for m in msgs), (calls, msgs)
  # 4 episodes of 10 steps (each after 3 padding frames): 40 transitions, less the last one
  # written, which Dopamine's invalid_range (the update horizon before the cursor) excludes.
  assert store.num_transitions == 39
  assert len(os.listdir(cache / replay_files.VERIFIED_DIR)) == 6  # 6 files of suffix 0
  obs = os.path.join(d, "$store$_observation_ckpt.0.gz")
  flip_stored_value(obs, slot=20, byte=100, mask=0x01)  # the trailer keeps the old CRC
  with pytest.raises(DatasetError, match=r"\$store\$_observation_ckpt\.0\.gz is corrupt"):
    FrameStore.from_replay(d, num_actions=3)
  assert calls == ["$store$_observation_ckpt.0.gz"]


def test_a_verified_file_renamed_unchanged_keeps_its_verification(tmp_path, cache):
  """remember_moved carries a record over to the new path only for the very file, unchanged
  (a folder renamed into place); a file that merely has the same name and bytes is verified
  again."""
  src = tmp_path / "tmp-folder"
  src.mkdir()
  name = "$store$_action_ckpt.0.gz"
  shutil.copy(os.path.join(TESTDATA, name), src / name)
  old = str(src / name)
  with replay_files.verified_read(old) as f:
    f.read(16)  # first use: read to its end and recorded
  assert replay_files.is_verified(old, replay_files.file_identity(old))
  dst = tmp_path / "final"
  os.rename(src, dst)
  new = str(dst / name)
  replay_files.remember_moved(old, new)
  assert replay_files.is_verified(new, replay_files.file_identity(new))
  assert not os.path.exists(replay_files.verification_record(old))
  # A copy with the same bytes under another name is another file: not carried over.
  other = str(tmp_path / "copy.gz")
  shutil.copy(new, other)
  replay_files.remember_moved(new, other)
  assert not replay_files.is_verified(other, replay_files.file_identity(other))
  # Nor is a record whose file changed before the move.
  with open(new, "r+b") as f:
    f.write(f.read(1))  # the same byte written back: new mtime and ctime
  moved = str(tmp_path / "moved.gz")
  os.rename(new, moved)
  replay_files.remember_moved(new, moved)
  assert not replay_files.is_verified(moved, replay_files.file_identity(moved))


def test_a_truncated_file_read_only_for_its_leading_rows_is_refused_naming_it(tmp_path, cache):
  """A subset of a checkpoint's leading rows reads its observation file only that far (not
  CRC-checked); before, a file cut short past those rows loaded without a word. Its gzip
  trailer's length is now checked against the .npy header (the same check a checkpoint pool
  makes of every file when it is made)."""
  import json  # pylint: disable=g-import-not-at-top
  d = copy_testdata(tmp_path)
  record = os.path.join(d, replay_files.METADATA_FILENAME)
  with open(record) as f:
    meta = json.load(f)
  meta["subsets"] = {"first40": [40, None], "all": [None, None]}
  with open(record, "w") as f:
    json.dump(meta, f)
  path = os.path.join(d, "$store$_observation_ckpt.1.gz")
  whole = FrameStore.from_replay(d, "first40", num_actions=4)
  assert whole.num_frames <= 3 * 40
  with open(path, "r+b") as f:
    f.truncate(40_000)
  with pytest.raises(DatasetError) as e:
    FrameStore.from_replay(d, "first40", num_actions=4)
  msg = str(e.value)
  assert msg.startswith(path + " is corrupt: ") and "replace the file" in msg, msg
  assert len(msg.splitlines()) == 1
