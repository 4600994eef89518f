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
from tests.test_replay_verify import flip_stored_value

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
  # Compressed by default: the arrays as zlib streams.
  assert sorted(os.listdir(entry)) == ["action.zlib", "frames.zlib", "manifest.json",
                                       "reward.zlib", "terminal.zlib", "valid.zlib"]
  assert os.path.getsize(os.path.join(entry, "frames.zlib")) < local.frames.nbytes // 10
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


def _random_checkpoint(d, cap=400, seed=0):
  """One checkpoint of ``cap`` random (incompressible) 84x84 frames, no episode end, and a
  subset table: "first40" (the first 40 slots taken literally) and "all"."""
  rng = np.random.default_rng(seed)
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
  return d


def test_remote_prefix_subset_reads_only_the_start_of_the_observation_file(
    tmp_path, ram_root, cache_env, gfile_log):
  """400 random (incompressible) frames: a subset of the first 40 slots fetches only the
  start of the 2.8 MB observation file, on its first use too (a prefix read is not
  CRC-checked, and the file is not recorded as verified); the whole checkpoint ("all")
  reads it whole and verifies it."""
  d = _random_checkpoint(str(tmp_path / "big"))
  remote = copy_to_ram(d, ram_root + "/big")
  local = FrameStore.from_replay(d, "first40")
  obs = remote + "/$store$_observation_ckpt.0.gz"
  size = tf.io.gfile.stat(obs).length
  assert size > 2_500_000
  msgs = []
  first = FrameStore.from_replay(remote, "first40", cache_dir=str(tmp_path / "c1"),
                                 progress=msgs.append)
  assert_same_store(first, local)
  assert first.num_frames == 40 and first.num_transitions == 36  # slots 3..38
  assert gfile_log["opened"].count(obs) == 1
  assert 0 < gfile_log["read"][obs] < size // 4  # 40 of 400 rows, plus read-ahead
  assert not replay_files.is_verified(obs, replay_files.file_identity(obs))
  assert any(m.startswith("Reading only the leading rows of 1 observation file(s)")
             for m in msgs), msgs
  assert not any(m.startswith("Verifying") for m in msgs), msgs
  # The small files were read whole, and verified.
  for name in ("action", "reward", "terminal"):
    path = remote + "/$store$_{}_ckpt.0.gz".format(name)
    assert replay_files.is_verified(path, replay_files.file_identity(path)), name
  # The whole checkpoint ("all") reads the whole file, and verifies it.
  gfile_log["read"].clear()
  msgs = []
  FrameStore.from_replay(remote, "all", cache_dir=str(tmp_path / "c2"), progress=msgs.append)
  assert gfile_log["read"][obs] == size  # 399 of the 400 rows, then on to its end
  assert replay_files.is_verified(obs, replay_files.file_identity(obs))
  assert any(m.startswith("Verifying 1 observation file(s)") for m in msgs), msgs


def test_verify_prefixes_reads_a_prefix_subset_to_the_end_once(
    tmp_path, ram_root, cache_env, gfile_log, monkeypatch):
  """With $CCVL_VERIFY_PREFIXES=1 the first prefix read of a file reads on to its end for its
  CRC-32 (a flipped byte past the prefix is then refused, which a prefix read alone does not
  see); a second use reads only the prefix."""
  d = _random_checkpoint(str(tmp_path / "big"))
  remote = copy_to_ram(d, ram_root + "/big")
  obs = remote + "/$store$_observation_ckpt.0.gz"
  size = tf.io.gfile.stat(obs).length
  # A byte flipped in the stored frames past slot 40, the trailer's CRC-32 kept: a copy in
  # stored (uncompressed) deflate blocks, as test_replay_verify.py makes them.
  bad = str(tmp_path / "bad")
  os.makedirs(bad)
  for n in os.listdir(d):
    with open(os.path.join(d, n), "rb") as f, open(os.path.join(bad, n), "wb") as g:
      g.write(f.read())
  flip_stored_value(os.path.join(bad, "$store$_observation_ckpt.0.gz"), 300, 5, 0xFF)
  bad_remote = copy_to_ram(bad, ram_root + "/bad")
  FrameStore.from_replay(bad_remote, "first40", cache_dir=str(tmp_path / "c0"),
                         progress=lambda m: None)  # the flip lies past the prefix read
  monkeypatch.setenv(replay_files.VERIFY_PREFIXES_ENV, "1")
  with pytest.raises(DatasetError, match=r"observation_ckpt\.0\.gz is corrupt: CRC check"):
    FrameStore.from_replay(bad_remote, "first40", cache_dir=str(tmp_path / "c1"),
                           progress=lambda m: None)
  gfile_log["read"].clear()
  FrameStore.from_replay(remote, "first40", cache_dir=str(tmp_path / "c2"),
                         progress=lambda m: None)
  assert gfile_log["read"][obs] == size
  assert replay_files.is_verified(obs, replay_files.file_identity(obs))
  gfile_log["read"].clear()
  FrameStore.from_replay(remote, "first40", cache_dir=str(tmp_path / "c3"),
                         progress=lambda m: None)
  assert 0 < gfile_log["read"][obs] < size // 4


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


@pytest.mark.parametrize("mode", [store_cache.COMPRESSED, store_cache.UNCOMPRESSED])
@pytest.mark.parametrize("damage", ["truncate_frames", "flip_valid", "drop_manifest"])
def test_damaged_cache_is_detected_and_rebuilt(ram_root, cache_env, gfile_log, damage, mode,
                                               monkeypatch):
  monkeypatch.setenv(store_cache.MODE_ENV, mode)
  ext = "zlib" if mode == store_cache.COMPRESSED else "npy"
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  first = FrameStore.from_replay(remote, "all", progress=lambda m: None)
  [key] = entries(cache_env)
  entry = os.path.join(cache_env, key)
  if damage == "truncate_frames":
    path = os.path.join(entry, "frames." + ext)
    os.truncate(path, os.path.getsize(path) - 100)
    why = r"frames\.%s has \d+ bytes, the manifest says \d+ \(truncated\?\)" % ext
  elif damage == "flip_valid":
    path = os.path.join(entry, "valid." + ext)
    with open(path, "r+b") as f:
      f.seek(-3, os.SEEK_END)  # npy: a byte of the last slot index; zlib: of its Adler-32
      b = f.read(1)
      f.seek(-3, os.SEEK_END)
      f.write(bytes([b[0] ^ 0xFF]))
    why = (r"valid\.npy: CRC-32 mismatch" if ext == "npy" else
           r"valid\.zlib: block 0 does not inflate: .*incorrect data check")
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


def test_first_use_of_a_subset_of_leading_slots_reads_the_leading_rows_of_each_checkpoint(
    tmp_path, ram_root, cache_env, gfile_log):
  """A run of several checkpoints of 400 random (incompressible) frames, written by the
  replay writer and copied to ram:// (so nothing is recorded as verified), with a subset of
  the first 40 slots of every checkpoint (the DQN Replay "1%" at 1/10 scale): its first use
  opens every checkpoint's six files once and fetches the small ones whole, but of each
  observation file only about its first 40 of 400 rows (before: every observation file whole,
  for its CRC-32)."""
  from ccvl_tf.data import replay_writer  # pylint: disable=g-import-not-at-top
  d = str(tmp_path / "run")
  rng = np.random.default_rng(1)
  w = replay_writer.DopamineReplayWriter(
      d, replay_capacity=400, metadata={"subsets": {"1%": [40, None], "all": [None, None]}})
  for i in range(3 * 400 - 20):
    w.add(rng.integers(0, 256, (84, 84), dtype=np.uint8), int(rng.integers(0, 4)), 0.0,
          i % 50 == 49)
  suffixes = w.close()
  assert suffixes == [0, 1, 2, 3]  # three full buffers (episodes are padded), the final one
  remote = copy_to_ram(d, ram_root + "/run")
  store = FrameStore.from_replay(remote, "1%", progress=lambda m: None)
  assert 0 < store.num_frames <= 4 * 40
  obs = [remote + "/$store$_observation_ckpt.{}.gz".format(s) for s in suffixes]
  assert sorted(gfile_log["opened"]) == sorted(
      remote + "/" + n for n in replay_files.files_read(
          [n for n in tf.io.gfile.listdir(remote)], suffixes))
  for path in obs:
    # 40 rows of 84 x 84 bytes, deflated as stored (random), plus gzip's read-ahead (128 KiB
    # a read) and the headers
    assert 0 < gfile_log["read"][path] < 40 * 84 * 84 + 2 * 128 * 1024, path
  for path in obs[:3]:
    assert gfile_log["read"][path] < tf.io.gfile.stat(path).length // 4, path
  small = [p for p in gfile_log["opened"] if p not in obs]
  for path in small:
    assert gfile_log["read"][path] == tf.io.gfile.stat(path).length, path
  total = sum(tf.io.gfile.stat(remote + "/" + n).length for n in tf.io.gfile.listdir(remote))
  assert sum(gfile_log["read"].values()) < total // 4


@pytest.mark.parametrize("mode", [store_cache.UNCOMPRESSED, store_cache.OFF])
def test_the_cache_can_be_written_uncompressed_or_turned_off(ram_root, cache_env, gfile_log,
                                                             mode, monkeypatch):
  """$CCVL_STORE_CACHE=uncompressed writes .npy files (read back as the compressed ones are);
  =off reads and writes no entry: every load reads the source."""
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  local = FrameStore.from_replay(TESTDATA, "all", num_actions=4)
  monkeypatch.setenv(store_cache.MODE_ENV, mode)
  msgs = []
  first = FrameStore.from_replay(remote, "all", num_actions=4, progress=msgs.append)
  assert_same_store(first, local)
  del gfile_log["opened"][:]
  second = FrameStore.from_replay(remote, "all", num_actions=4, progress=msgs.append)
  assert_same_store(second, local)
  if mode == store_cache.OFF:
    assert entries(cache_env) == []
    assert any("the frame store will not be cached ($CCVL_STORE_CACHE=off)" in m for m in msgs)
    assert len(gfile_log["opened"]) == len(os.listdir(TESTDATA))  # read again
  else:
    [key] = entries(cache_env)
    assert sorted(os.listdir(os.path.join(cache_env, key))) == [
        "action.npy", "frames.npy", "manifest.json", "reward.npy", "terminal.npy", "valid.npy"]
    assert gfile_log["opened"] == [] and msgs[-1].startswith("Using the cached")
    # Another mode reads the entry as it was written.
    monkeypatch.setenv(store_cache.MODE_ENV, store_cache.COMPRESSED)
    assert_same_store(FrameStore.from_replay(remote, "all", num_actions=4,
                                             progress=msgs.append), local)
    assert gfile_log["opened"] == [] and msgs[-1].startswith("Using the cached")


def test_an_unknown_cache_mode_is_refused_naming_the_variable(ram_root, cache_env, monkeypatch):
  remote = copy_to_ram(TESTDATA, ram_root + "/replay_logs")
  monkeypatch.setenv(store_cache.MODE_ENV, "zstd")
  with pytest.raises(ValueError, match=r"\$CCVL_STORE_CACHE='zstd': expected one of "
                                       r"compressed, uncompressed, off"):
    FrameStore.from_replay(remote, "all", progress=lambda m: None)
