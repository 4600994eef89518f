"""Reading replay directories through tf.io.gfile, and the local frame store cache.

TensorFlow's in-memory file system (``ram://``) stands in for gs://: any path with
"://" takes the same non-local code path (GFile as the fileobj of gzip.GzipFile;
gfile.listdir/exists/isdir/stat) and FrameStore.from_replay caches what it builds.
GFile opens and bytes read are counted with a wrapper around tf.io.gfile.GFile.
"""
import collections
import gzip
import json
import os
import re
import uuid

import numpy as np
import pytest
import tensorflow as tf

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay, replay_files, replay_source, store_cache
from ccvl_tf.data.replay_files import DatasetError
from ccvl_tf.data.frame_store import FrameStore

TESTDATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "testdata", "dqn_replay", "Breakout", "1", "replay_logs")
OBS1 = "$store$_observation_ckpt.1.gz"


@pytest.fixture
def ram_root():
  root = "ram://ccvl_test_{}".format(uuid.uuid4().hex)
  yield root
  if tf.io.gfile.exists(root):
    tf.io.gfile.rmtree(root)


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
  """CCVL_CACHE_DIR under tmp_path; returns the frame_stores directory."""
  monkeypatch.setenv(store_cache.CACHE_ENV, str(tmp_path / "cache"))
  return str(tmp_path / "cache" / "frame_stores")


@pytest.fixture
def gfile_log(monkeypatch):
  """Counts tf.io.gfile.GFile opens for reading, the bytes read from each path, and
  the calls of gfile.exists/isdir/listdir/stat."""
  log = dict(opened=[], read=collections.Counter(), calls=collections.Counter())
  base = tf.io.gfile.GFile

  def counted(name, fn):
    def wrapper(path):
      log["calls"][name] += 1
      return fn(path)
    return wrapper

  for name in ("exists", "isdir", "listdir", "stat"):
    monkeypatch.setattr(tf.io.gfile, name, counted(name, getattr(tf.io.gfile, name)))

  class CountingGFile(base):

    def __init__(self, name, mode="r"):
      if "r" in mode:
        log["opened"].append(name)
      super().__init__(name, mode)

    def read(self, n=-1):
      data = super().read(n)
      log["read"][self.name] += len(data)
      return data

  monkeypatch.setattr(tf.io.gfile, "GFile", CountingGFile)
  return log


def copy_to_ram(local_dir, ram_dir):
  tf.io.gfile.makedirs(ram_dir)
  for name in sorted(os.listdir(local_dir)):
    with open(os.path.join(local_dir, name), "rb") as f:
      data = f.read()
    write_ram(ram_dir + "/" + name, data)
  return ram_dir


def write_ram(path, data):
  # TF 2.16's ram:// file system appends on "wb" to an existing file: remove it first.
  if tf.io.gfile.exists(path):
    tf.io.gfile.remove(path)
  with tf.io.gfile.GFile(path, "wb") as f:
    f.write(data)


def read_ram(path):
  with tf.io.gfile.GFile(path, "rb") as f:
    return f.read()


def assert_same_store(a, b):
  for name in ("frames", "action", "reward", "terminal", "valid"):
    x, y = getattr(a, name), getattr(b, name)
    assert x.dtype == y.dtype and x.shape == y.shape, name
    np.testing.assert_array_equal(x, y, err_msg=name)
  assert a.stack_size == b.stack_size


def entries(frame_stores):
  return sorted(os.listdir(frame_stores)) if os.path.isdir(frame_stores) else []


# ------------------------------------------------------------------------ tests

def test_remote_store_equals_local_and_second_load_reads_only_the_listing(
    ram_root, cache_env, gfile_log):
  remote = copy_to_ram(TESTDATA, ram_root + "/Breakout/1/replay_logs")
  local = FrameStore.from_replay(TESTDATA, "all", num_actions=4)
  msgs = []
  first = FrameStore.from_replay(remote, "all", num_actions=4, progress=msgs.append)
  assert_same_store(first, local)
  assert first.num_transitions > 2400
  # Every file of the 3 suffixes + ccvl_dataset.json was read, each opened once.
  opened = [os.path.basename(p) for p in gfile_log["opened"]]
  assert sorted(opened) == sorted(n for n in os.listdir(TESTDATA))
  assert any("through tf.io.gfile" in m for m in msgs)
  [key] = entries(cache_env)
  entry = os.path.join(cache_env, key)
  assert sorted(os.listdir(entry)) == ["action.npy", "frames.npy", "manifest.json",
                                       "reward.npy", "terminal.npy", "valid.npy"]
  manifest = json.load(open(os.path.join(entry, "manifest.json")))
  assert manifest["source"]["replay_dir"] == remote and manifest["source"]["subset"] == "all"
  assert manifest["source"]["listing"] == sorted(os.listdir(TESTDATA))
  sizes = {n: os.path.getsize(os.path.join(TESTDATA, n)) for n in os.listdir(TESTDATA)}
  assert {n: s for n, (s, _) in manifest["source"]["files"].items()} == sizes
  assert manifest["arrays"]["frames"]["shape"] == list(local.frames.shape)

  # Second load: no GFile opened, one listing + one stat per source file, same store.
  del gfile_log["opened"][:]
  gfile_log["calls"].clear()
  msgs.clear()
  second = FrameStore.from_replay(remote, "all", num_actions=4, progress=msgs.append)
  assert gfile_log["opened"] == []
  assert gfile_log["calls"] == {"listdir": 1, "stat": len(os.listdir(TESTDATA))}
  assert_same_store(second, local)
  assert len(msgs) == 1 and msgs[0].startswith("Using the cached frame store " + entry)
  # Other arguments are another entry.
  FrameStore.from_replay(remote, "all", num_actions=4, suffixes=[1], progress=msgs.append)
  assert len(entries(cache_env)) == 2


def test_remote_prefix_subset_reads_only_the_start_of_the_observation_file(
    tmp_path, ram_root, gfile_log):
  """400 random (incompressible) frames. The first read of the file verifies it, reading it
  to the end once; after that a subset of the first 40 slots must not fetch the rest of the
  2.8 MB observation file."""
  d = str(tmp_path / "big")
  rng = np.random.default_rng(0)
  cap = 400
  arrays = {"$store$_observation": rng.integers(0, 256, (cap, 84, 84), dtype=np.uint8),
            "$store$_action": rng.integers(0, 4, cap).astype(np.int32),
            "$store$_reward": np.zeros(cap, np.float32),
            "$store$_terminal": np.zeros(cap, np.uint8),
            "add_count": np.array(cap - 1),
            "invalid_range": np.array([(cap - 2 + i) % cap for i in range(5)])}
  os.makedirs(d)
  for name, arr in arrays.items():
    with gzip.open(os.path.join(d, name + "_ckpt.0.gz"), "wb") as f:
      np.save(f, arr, allow_pickle=False)
  with open(os.path.join(d, replay_files.METADATA_FILENAME), "w") as f:
    json.dump({"subsets": {"first40": [40, None, "prefix"], "all": [None, None]}}, f)
  remote = copy_to_ram(d, ram_root + "/big")
  local = FrameStore.from_replay(d, "first40")
  obs = remote + "/$store$_observation_ckpt.0.gz"
  size = tf.io.gfile.stat(obs).length
  assert size > 2_500_000
  first = FrameStore.from_replay(remote, "first40", cache_dir=str(tmp_path / "c1"),
                                 progress=lambda m: None)
  assert_same_store(first, local)
  assert gfile_log["read"][obs] == size  # verified on first use: read to its end
  gfile_log["read"].clear()
  del gfile_log["opened"][:]
  got = FrameStore.from_replay(remote, "first40", cache_dir=str(tmp_path / "c2"),
                               progress=lambda m: None)
  assert_same_store(got, local)
  assert got.num_frames == 40 and got.num_transitions == 36  # slots 3..38
  assert gfile_log["opened"].count(obs) == 1
  assert 0 < gfile_log["read"][obs] < size // 4
  # The whole checkpoint ("all") reads the whole file.
  before = gfile_log["read"][obs]
  FrameStore.from_replay(remote, "all", cache_dir=str(tmp_path / "c2"), progress=lambda m: None)
  assert gfile_log["read"][obs] - before > 0.95 * size  # 399 of the 400 rows


@pytest.mark.parametrize("name", [OBS1, "$store$_terminal_ckpt.2.gz"])
def test_truncated_remote_file_is_named_and_leaves_no_cache(ram_root, cache_env, name):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  path = remote + "/" + name
  data = read_ram(path)
  write_ram(path, data[:len(data) // 2])
  with pytest.raises(DatasetError, match=r"ram://.*" + name.replace("$", r"\$").replace(
      ".", r"\.") + r".*truncated"):
    FrameStore.from_replay(remote, "all", progress=lambda m: None)
  assert entries(cache_env) == []  # no entry, no temporary directory


@pytest.mark.parametrize("damage", ["truncate_frames", "flip_valid", "drop_manifest"])
def test_damaged_cache_is_detected_and_rebuilt(ram_root, cache_env, gfile_log, damage):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  first = FrameStore.from_replay(remote, "all", progress=lambda m: None)
  [key] = entries(cache_env)
  entry = os.path.join(cache_env, key)
  if damage == "truncate_frames":
    path = os.path.join(entry, "frames.npy")
    os.truncate(path, os.path.getsize(path) - 7056)
    why = r"frames\.npy has \d+ bytes, the manifest says \d+ \(truncated\?\)"
  elif damage == "flip_valid":
    path = os.path.join(entry, "valid.npy")
    with open(path, "r+b") as f:
      f.seek(-3, os.SEEK_END)
      b = f.read(1)
      f.seek(-3, os.SEEK_END)
      f.write(bytes([b[0] ^ 0xFF]))
    why = r"valid\.npy: CRC-32 mismatch"
  else:
    os.remove(os.path.join(entry, "manifest.json"))
    why = r"manifest\.json is missing"
  del gfile_log["opened"][:]
  msgs = []
  again = FrameStore.from_replay(remote, "all", progress=msgs.append)
  assert_same_store(again, first)
  assert len(gfile_log["opened"]) == 19  # rebuilt from the source
  assert re.search(r"frame store cache .* is truncated or corrupt: .*" + why + r".*rebuilding",
                   msgs[0]), msgs[0]
  assert entries(cache_env) == [key]
  # The rebuilt entry is used next time.
  del gfile_log["opened"][:]
  FrameStore.from_replay(remote, "all", progress=msgs.append)
  assert gfile_log["opened"] == [] and msgs[-1].startswith("Using the cached")


@pytest.mark.parametrize("change", ["new_file", "resized_file"])
def test_stale_cache_is_rebuilt_when_the_source_changes(ram_root, cache_env, gfile_log, change):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  FrameStore.from_replay(remote, "all", progress=lambda m: None)
  if change == "new_file":
    write_ram(remote + "/README.txt", b"notes")
    why = r"the listing of ram://.* changed: 1 file\(s\) added, e\.g\. README\.txt"
  else:
    # Same content, stored uncompressed: another size.
    path = remote + "/$store$_reward_ckpt.0.gz"
    write_ram(path, gzip.compress(gzip.decompress(read_ram(path)), compresslevel=0))
    why = r"ram://.*reward_ckpt\.0\.gz changed \(size, mtime_ns \[164, 0\] -> \[\d+, 0\]\)"
  del gfile_log["opened"][:]
  msgs = []
  again = FrameStore.from_replay(remote, "all", progress=msgs.append)
  assert_same_store(again, FrameStore.from_replay(TESTDATA, "all"))
  assert re.search(r"frame store cache .* is stale: " + why, msgs[0]), msgs[0]
  assert len(gfile_log["opened"]) == 19
  del gfile_log["opened"][:]
  FrameStore.from_replay(remote, "all", progress=msgs.append)
  assert gfile_log["opened"] == []


def test_unreachable_source_uses_a_complete_cache_as_is(ram_root, cache_env, monkeypatch):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  first = FrameStore.from_replay(remote, "all", progress=lambda m: None)

  def offline(path):
    raise replay_files.UnreachableError("could not reach {} (no network)".format(path))

  monkeypatch.setattr(replay_files, "list_dir", offline)
  msgs = []
  assert_same_store(FrameStore.from_replay(remote, "all", progress=msgs.append), first)
  assert "not checked against the source: could not reach" in msgs[0]


def test_reader_functions_on_remote_paths(ram_root):
  remote = copy_to_ram(TESTDATA, ram_root + "/Breakout/1/replay_logs")
  run_dir = ram_root + "/Breakout/1"
  assert replay_source.resolve_replay_dir(run_dir) == remote
  assert replay_source.list_suffixes(run_dir) == [0, 1, 2]
  assert replay_files.read_metadata(remote)["game"] == "Breakout"
  ref = dqn_replay.load_checkpoint(TESTDATA, 1, num_actions=4)
  got = dqn_replay.load_checkpoint(remote, 1, num_actions=4)
  for name in ("observation", "action", "reward", "terminal", "invalid_range"):
    np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
  assert dqn_replay.load_checkpoint(remote, 1, max_rows=10).observation.shape == (10, 84, 84)
  loc = list(dqn_replay.iterate_transitions(TESTDATA, 2, replay_capacity=500))
  rem = list(dqn_replay.iterate_transitions(remote, 2, replay_capacity=500))
  assert len(rem) == len(loc) > 400
  np.testing.assert_array_equal(np.stack([t.observation for t in rem]),
                                np.stack([t.observation for t in loc]))
  with pytest.raises(DatasetError, match="replay directory does not exist: ram://.*nope"):
    replay_source.list_suffixes(ram_root + "/nope")
  tf.io.gfile.remove(remote + "/add_count_ckpt.2.gz")
  with pytest.raises(DatasetError, match=r"suffix 2 in ram://.*missing .*add_count_ckpt\.2\.gz"):
    replay_source.list_suffixes(remote)


def test_offline_config_accepts_remote_dataset_dirs(ram_root, monkeypatch):
  from ccvl_tf.experiments.offline import config as offline_config
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  offline_config.OfflineConfig(dataset_dir=remote, subset="all").validate()
  # A remote game folder (<game>/<run>/replay_logs) names its runs.
  for run in ("1", "2"):
    copy_to_ram(TESTDATA, f"{ram_root}/Pong/{run}/replay_logs")
  with pytest.raises(ValueError, match=r"^--dataset_dir ram://\S+/Pong is a game folder holding "
                                       r"runs 1, 2 .*: pass ram://\S+/Pong/1/replay_logs$"):
    offline_config.OfflineConfig(dataset_dir=ram_root + "/Pong").validate()
  with pytest.raises(ValueError, match=r"--dataset_dir ram://.*/nope does not exist"):
    offline_config.OfflineConfig(dataset_dir=ram_root + "/nope").validate()
  # gs:// without network (simulated, so that the test does not depend on the machine's
  # network): TensorFlow's GCS client fails with FailedPreconditionError.
  real_exists = tf.io.gfile.exists

  def no_network(path):
    if str(path).startswith("gs://"):
      raise tf.errors.FailedPreconditionError(
          None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Couldn't "
          "resolve host name'")
    return real_exists(path)

  monkeypatch.setattr(tf.io.gfile, "exists", no_network)
  gs = "gs://atari-replay-datasets/dqn/Breakout/1/replay_logs"
  with pytest.raises(ValueError, match=r"--dataset_dir gs://atari-replay-datasets/\S+ could "
                                       r"not be reached \(FailedPreconditionError: .*resolve "
                                       r"host name.*\); .*network access"):
    offline_config.OfflineConfig(dataset_dir=gs).validate()


def test_leftovers_of_killed_builds_are_removed_and_never_used(ram_root, cache_env):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  entry = store_cache.entry_dir(store_cache.key_fields(remote, "all"))
  key = os.path.basename(entry)
  dead = os.path.join(cache_env, ".tmp-{}-999999999-x1".format(key))  # no such pid
  alive = os.path.join(cache_env, ".tmp-{}-{}-x2".format(key, os.getpid()))
  for d in (dead, alive):
    os.makedirs(d)
    open(os.path.join(d, "frames.npy"), "wb").close()
  msgs = []
  FrameStore.from_replay(remote, "all", progress=msgs.append)
  assert not any("Using the cached" in m for m in msgs)
  assert entries(cache_env) == sorted([os.path.basename(alive), key])
