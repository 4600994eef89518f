"""The frame store cache as a plain get / put of arrays: a miss is None, what was put
comes back equal, and a damaged entry is said to be corrupt, removed and missed.

The cache through ``FrameStore.from_replay`` on a remote directory: tests/test_gfile_replay.py.
"""
import json
import os
import re

import numpy as np
import pytest

from ccvl_tf.data import replay_plan, store_cache

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


def _arrays():
  rng = np.random.default_rng(0)
  return dict(frames=rng.integers(0, 256, (12, 84, 84), dtype=np.uint8),
              action=rng.integers(0, 4, 12).astype(np.int32),
              reward=rng.normal(size=12).astype(np.float32),
              terminal=np.zeros(12, np.uint8), valid=np.arange(3, 11, dtype=np.int64))


def _source():
  info, plan = replay_plan.select_plan(TESTDATA, "1%")
  return store_cache.source_record(info, "1%", plan)


def test_a_miss_is_none(tmp_path):
  msgs = []
  key = store_cache.key_fields(TESTDATA, "1%")
  assert store_cache.get(key, str(tmp_path), msgs.append) is None
  assert msgs == []


def test_put_then_get_returns_equal_arrays(tmp_path):
  key = store_cache.key_fields(TESTDATA, "1%", num_actions=4)
  arrays = _arrays()
  msgs = []
  assert store_cache.put(key, store_cache.Cached(arrays, 4), _source(), str(tmp_path),
                         msgs.append)
  assert msgs[-1].startswith("Cached the frame store in " + store_cache.entry_dir(
      key, str(tmp_path)))
  got = store_cache.get(key, str(tmp_path), msgs.append)
  assert got.stack_size == 4 and sorted(got.arrays) == sorted(store_cache.ARRAYS)
  for name in store_cache.ARRAYS:
    assert got.arrays[name].dtype == arrays[name].dtype, name
    np.testing.assert_array_equal(got.arrays[name], arrays[name], err_msg=name)
  assert msgs[-1].startswith("Using the cached frame store") and "8 transitions" in msgs[-1]
  # Another key misses.
  assert store_cache.get(store_cache.key_fields(TESTDATA, "5%"), str(tmp_path)) is None


@pytest.mark.parametrize("mode", [store_cache.COMPRESSED, store_cache.UNCOMPRESSED])
def test_a_corrupt_entry_is_said_removed_and_missed(tmp_path, mode, monkeypatch):
  monkeypatch.setenv(store_cache.MODE_ENV, mode)
  key = store_cache.key_fields(TESTDATA, "1%")
  store_cache.put(key, store_cache.Cached(_arrays(), 4), _source(), str(tmp_path),
                  lambda m: None)
  entry = store_cache.entry_dir(key, str(tmp_path))
  path = os.path.join(entry, "valid.npy" if mode == store_cache.UNCOMPRESSED else "valid.zlib")
  with open(path, "rb") as f:
    data = bytearray(f.read())
  data[-3] ^= 0xFF  # npy: a byte of the last slot index; zlib: of the stream's Adler-32
  with open(path, "wb") as f:
    f.write(data)
  msgs = []
  assert store_cache.get(key, str(tmp_path), msgs.append) is None
  if mode == store_cache.UNCOMPRESSED:
    why = "{}: CRC-32 mismatch (altered or damaged)".format(path)
  else:
    why = ("{}: block 0 does not inflate: Error -3 while decompressing data: incorrect data "
           "check".format(path))
  assert msgs == ["The frame store cache {} is truncated or corrupt: {}; rebuilding it.".format(
      entry, why)]
  assert not os.path.exists(entry)


def test_compressed_arrays_span_several_zlib_streams(tmp_path, monkeypatch):
  """An array larger than a stream (BLOCK_BYTES, made small here) is written as several zlib
  streams and read back equal; the manifest records the stream size and each stream's size."""
  monkeypatch.setattr(store_cache, "BLOCK_BYTES", 5000)
  key = store_cache.key_fields(TESTDATA, "1%")
  arrays = _arrays()
  assert store_cache.put(key, store_cache.Cached(arrays, 4), _source(), str(tmp_path),
                         lambda m: None)
  entry = store_cache.entry_dir(key, str(tmp_path))
  manifest = json.load(open(os.path.join(entry, "manifest.json")))
  # 12 x 84 x 84 = 84,672 bytes: 16 streams of 5,000 bytes and one of 4,672
  assert len(manifest["arrays"]["frames"]["blocks"]) == 17
  assert manifest["arrays"]["frames"]["bytes"] == sum(manifest["arrays"]["frames"]["blocks"])
  # Read with the stream size the manifest records, whatever the module's is now.
  monkeypatch.setattr(store_cache, "BLOCK_BYTES", 1 << 24)
  got = store_cache.get(key, str(tmp_path), lambda m: None)
  for name in store_cache.ARRAYS:
    np.testing.assert_array_equal(got.arrays[name], arrays[name], err_msg=name)


def test_arrays_the_frame_store_refuses_are_rejected_as_corrupt(tmp_path):
  key = store_cache.key_fields(TESTDATA, "1%")
  store_cache.put(key, store_cache.Cached(_arrays(), 4), _source(), str(tmp_path),
                  lambda m: None)
  entry = store_cache.entry_dir(key, str(tmp_path))
  msgs = []
  store_cache.reject(key, ValueError("the frame store holds no valid transition"),
                     str(tmp_path), msgs.append)
  assert re.fullmatch(r"The frame store cache (\S+) is truncated or corrupt: \1: the arrays do "
                      r"not make a frame store: the frame store holds no valid transition; "
                      r"rebuilding it\.", msgs[0]), msgs[0]
  assert not os.path.exists(entry)
  assert store_cache.get(key, str(tmp_path)) is None
