"""binaries/collect_dataset.py and the writer -> reader round trip on real ALE data."""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.data import dqn_replay
from ccvl_tf.data import replay_files
from ccvl_tf.data import replay_source
from ccvl_tf.data import replay_writer
from ccvl_tf.data.frame_store import FrameStore
from ccvl_tf.envs import atari
from ccvl_tf.evaluation import rollouts
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")


class _Recorder:
  """Wraps an env; records (obs, action, clipped reward, next obs, last) per step."""

  def __init__(self, env):
    self.env = env
    self.steps = []
    self._last = None

  def reset(self):
    self._last = self.env.reset()
    return self._last

  def step(self, action):
    nxt = self.env.step(action)
    self.steps.append((self._last.observation, int(action), float(nxt.reward),
                       nxt.observation, bool(nxt.is_last())))
    self._last = nxt
    return nxt

  @property
  def episode_raw_return(self):
    return self.env.episode_raw_return


def _key(obs, action):
  return hashlib.sha1(np.ascontiguousarray(obs).tobytes() + bytes([action])).hexdigest()


def test_writer_reader_round_trip_on_real_breakout(tmp_path):
  env = _Recorder(atari.AtariEnvironment("Breakout", seed=2))
  out = str(tmp_path / "ds")
  w = replay_writer.DopamineReplayWriter(out, replay_capacity=256,
                                      metadata=dict(game="Breakout", num_actions=4))
  summary = replay_writer.collect(env, replay_writer.random_policy(4, seed=2), 900, w)
  suffixes = w.close()
  assert suffixes == [0, 1, 2, 3] and summary["episodes"] >= 1
  recorded = {}  # (obs, action) -> candidates (episode starts repeat the same stack)
  for obs, a, r, nxt, last in env.steps:
    recorded.setdefault(_key(obs, a), []).append((r, _key(nxt, 0), last))
  n = 0
  for s in replay_source.list_suffixes(out):
    for t in dqn_replay.iterate_transitions(out, s, num_actions=4):
      cands = recorded[_key(t.observation, t.action)]  # KeyError = not a real step
      nk = None if t.terminal else _key(t.next_observation, 0)
      assert any(t.reward == r and t.terminal == last and (last or nk == k)
                 for r, k, last in cands)
      n += 1
  # Lost only around the checkpoint seams: per logged buffer the slots within
  # stack_size of the cursor / array start, and the final buffer's stale slot.
  assert 900 - 8 * len(suffixes) <= n <= 900
  assert sum(last for *_, last in env.steps) == summary["episodes"]


@pytest.mark.slow
def test_binary_random_policy_end_to_end(tmp_path):
  out = str(tmp_path / "Breakout" / "1" / "replay_logs")
  cmd = [sys.executable, os.path.join(ROOT, "binaries", "collect_dataset.py"), "--game=Breakout",
         "--policy=random", "--steps=600", "--output_dir=" + out, "--replay_capacity=250",
         "--progress_every=300"]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
  assert res.returncode == 0, res.stderr[-2000:]
  assert "step 300/600" in res.stdout and "step 600/600" in res.stdout
  assert "steps/s" in res.stdout and "ETA" in res.stdout
  assert replay_source.list_suffixes(out) == [0, 1, 2]
  meta = json.load(open(os.path.join(out, replay_files.METADATA_FILENAME)))
  assert meta["game"] == "Breakout" and meta["num_actions"] == 4 and meta["policy"] == "random"
  store = FrameStore.from_replay(out, num_actions=4)
  assert 560 <= store.num_transitions <= 600
  before = sorted(os.listdir(out))
  again = forked_binary.run("collect_dataset.py", cmd[2:], env=dict(os.environ), timeout=120)
  assert again.returncode != 0 and "refusing to write over" in again.stderr
  assert sorted(os.listdir(out)) == before


@pytest.mark.slow
def test_binary_collects_a_gymnasium_environment_into_an_npz(tmp_path):
  out = tmp_path / "cartpole.npz"
  args = ["--game=gymnasium:CartPole-v1", "--steps=300", f"--output={out}", "--seed=2",
          "--progress_every=150"]
  res = forked_binary.run("collect_dataset.py", args, env=dict(os.environ), timeout=120)
  assert res.returncode == 0, res.stderr[-2000:]
  assert "step 150/300" in res.stdout and f"wrote {out}: 300 steps" in res.stdout
  data = np.load(out)
  assert sorted(data.files) == ["actions", "num_actions", "observations", "rewards", "terminals",
                                "timeouts"]
  assert data["observations"].shape == (300, 4) and data["terminals"].sum() >= 5
  assert data["terminals"][-1] or data["timeouts"][-1]
  again = forked_binary.run("collect_dataset.py", args, env=dict(os.environ), timeout=120)
  assert again.returncode != 0 and again.stderr.strip().splitlines() == [
      f"collect_dataset.py: error: --output {out} exists; refusing to write over it (remove "
      f"it, or give another path) (--helpshort lists the flags)"], again.stderr[-2000:]
  atari_flag = forked_binary.run("collect_dataset.py", args[:2] + [f"--output_dir={tmp_path}"],
                                 env=dict(os.environ), timeout=120)
  assert atari_flag.returncode != 0 and atari_flag.stderr.strip().splitlines()[-1].startswith(
      "collect_dataset.py: error: --output_dir is a setting of an Atari game; "
      "--game=gymnasium:CartPole-v1 does not take it"), atari_flag.stderr[-2000:]


@pytest.mark.slow
def test_binary_random_policy_on_the_vector_env(tmp_path):
  out = str(tmp_path / "Pong" / "1" / "replay_logs")
  cmd = [sys.executable, os.path.join(ROOT, "binaries", "collect_dataset.py"), "--game=Pong",
         "--policy=random", "--steps=400", "--output_dir=" + out, "--replay_capacity=1000",
         "--progress_every=200", "--num_envs=4"]
  res = forked_binary.run("collect_dataset.py", cmd[2:], env=dict(os.environ), timeout=120)
  assert res.returncode == 0, res.stderr[-2000:]
  assert "on 4 copies of the vector environment" in res.stdout
  assert "step 400/400" in res.stdout
  meta = json.load(open(os.path.join(out, replay_files.METADATA_FILENAME)))
  assert meta["collection_env"] == "vector" and meta["num_envs"] == 4
  assert FrameStore.from_replay(out, num_actions=6).num_transitions == 399
  bad = forked_binary.run("collect_dataset.py", [cmd[2], "--policy=" + str(tmp_path),
                                                 "--steps=10", "--output_dir=" + str(tmp_path / "x"),
                                                 "--num_envs=2"], env=dict(os.environ), timeout=120)
  assert bad.returncode != 0 and "needs --num_envs=1" in bad.stderr, bad.stderr[-2000:]


# collect_dataset.py with every directory creation under a path refused as a read-only mount
# refuses it (EROFS, injected into os.makedirs; the binary itself is unchanged).
READ_ONLY = """
import errno, os, runpy, sys
target = sys.argv[1]
real = os.makedirs
def makedirs(path, *args, **kwargs):
  if os.path.abspath(os.fsdecode(path)).startswith(target):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
  return real(path, *args, **kwargs)
os.makedirs = makedirs
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_binary_into_a_read_only_or_too_long_directory_is_one_line(tmp_path):
  binary = os.path.join(ROOT, "binaries", "collect_dataset.py")
  out = str(tmp_path / "ro" / "Breakout" / "1" / "replay_logs")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  res = subprocess.run([sys.executable, "-c", READ_ONLY, str(tmp_path / "ro"), binary,
                        "--game=Breakout", "--steps=10", "--output_dir=" + out],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
  assert res.returncode != 0
  lines = res.stderr.strip().splitlines()
  assert lines == [f"collect_dataset.py: error: could not write {out}: Read-only file system"], \
      res.stderr[-2000:]
  too_long = str(tmp_path / ("b" * 300) / "replay_logs")
  res = subprocess.run([sys.executable, binary, "--game=Breakout", "--steps=10",
                        "--output_dir=" + too_long], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env=env)
  assert res.returncode != 0 and "Traceback" not in res.stderr
  assert res.stderr.strip().splitlines()[-1].startswith(
      "collect_dataset.py: error: --output_dir: the path component 'bbbb"), res.stderr[-2000:]
  assert "is 300 bytes long, longer than the file system allows" in res.stderr


def test_saved_model_policy_is_used(tmp_path):
  from tf_agents.policies import fixed_policy, policy_saver
  from tf_agents.specs import tensor_spec
  from tf_agents.trajectories import time_step as ts_lib
  env = atari.AtariEnvironment("Breakout", seed=0)
  obs_spec = tensor_spec.from_spec(env.observation_spec())
  act_spec = tensor_spec.from_spec(env.action_spec())
  policy = fixed_policy.FixedPolicy(np.array(2, np.int32), ts_lib.time_step_spec(obs_spec),
                                    act_spec)
  pdir = str(tmp_path / "policy")
  policy_saver.PolicySaver(policy, batch_size=None).save(pdir)
  out = str(tmp_path / "ds")
  w = replay_writer.DopamineReplayWriter(out, replay_capacity=100)
  replay_writer.collect(env, rollouts.saved_model_policy(pdir), 40, w)
  w.close()
  ckpt = dqn_replay.load_checkpoint(out, 0, num_actions=4)
  acts = ckpt.action[ckpt.valid_indices()]
  assert acts.size > 30 and (acts == 2).all()
  with pytest.raises(ValueError, match="SavedModel"):
    rollouts.saved_model_policy(str(tmp_path / "nope"))


@pytest.mark.slow
def test_a_policy_of_another_game_is_refused_before_anything_is_written(tmp_path):
  """A Breakout export (ALE actions [0, 1, 3, 4]) collecting on Atlantis ([0, 1, 11, 12]): the
  action count and frames agree, so before, it wrote a dataset whose record said Atlantis.
  The binary refuses it in one line and writes nothing."""
  from tests.test_evaluate_binary import _export_pixel_policy
  pdir = _export_pixel_policy(tmp_path / "breakout", (84, 84, 4), 4, game="Breakout",
                              action_set=[0, 1, 3, 4])
  with pytest.raises(ValueError, match=r"records a policy of another game: the game Breakout, "
                                       r"but this run's game is Atlantis; the action set"):
    rollouts.saved_model_policy(pdir, atari.AtariEnvironment("Atlantis"))
  out = tmp_path / "ds"
  res = forked_binary.run("collect_dataset.py", ["--game=Atlantis", "--steps=10",
                                                 f"--policy={pdir}", f"--output_dir={out}"],
                          timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                                PYTHONPATH=ROOT))
  assert res.returncode != 0
  assert res.stderr.strip().splitlines() == [
      f"collect_dataset.py: error: {pdir}/ccvl_policy.json records a policy of another game: "
      f"the game Breakout, but this run's game is Atlantis; the action set (action ids) "
      f"[0, 1, 3, 4], but Atlantis's is [0, 1, 11, 12]. Use it with the game it was trained "
      f"in (Breakout) (--helpshort lists the flags)"], res.stderr[-2000:]
  assert not os.path.exists(out / replay_files.METADATA_FILENAME)
  assert not any(replay_files.CKPT_RE.match(n) for n in (os.listdir(out) if out.exists() else []))


def test_testdata_is_real_format_breakout():
  assert replay_source.list_suffixes(TESTDATA) == [0, 1, 2]
  meta = replay_files.read_metadata(TESTDATA)
  assert meta["game"] == "Breakout" and meta["num_actions"] == 4
  c0 = dqn_replay.load_checkpoint(TESTDATA, 0, num_actions=4)
  assert c0.observation.shape == (1000, 84, 84) and c0.add_count == 999
  assert c0.invalid_range.tolist() == [998, 999, 0, 1, 2]
  store = FrameStore.from_replay(TESTDATA, num_actions=4)
  # The run directory (<game>/<run>) works too: replay_logs/ is found.
  assert FrameStore.from_replay(os.path.dirname(TESTDATA)).num_transitions == store.num_transitions
  assert store.num_transitions > 2400 and store.terminal.sum() >= 10
  with pytest.raises(replay_files.DatasetError, match="another game"):
    FrameStore.from_replay(TESTDATA, num_actions=3)


@pytest.mark.parametrize("zero_from", [None, 0, 3, 7, 10])
def test_gzip_of_a_buffer_is_np_save_whatever_the_zero_tail(tmp_path, zero_from):
  # The bytes np.save writes, with the rows from `zero_from` on all zero and skipped.
  rng = np.random.default_rng(0)
  arrays = {"frames": rng.integers(1, 255, (10, 84, 84), dtype=np.uint8),
            "reward": rng.normal(size=10).astype(np.float32),
            "terminal": (rng.random(10) < 0.3).astype(np.uint8)}
  for name, arr in arrays.items():
    if zero_from is not None:
      arr[zero_from:] = 0
    path = str(tmp_path / f"{name}_{zero_from}.gz")
    replay_writer._save_gz(path, arr, zero_rows_from=zero_from)  # pylint: disable=protected-access
    expected = io.BytesIO()
    np.save(expected, arr, allow_pickle=False)
    with gzip.open(path, "rb") as f:                     # the gzip module checks CRC and size
      assert f.read() == expected.getvalue()
  scalar = str(tmp_path / f"count_{zero_from}.gz")
  replay_writer._save_gz(scalar, np.array(12345), zero_rows_from=zero_from)  # pylint: disable=protected-access
  expected = io.BytesIO()
  np.save(expected, np.array(12345), allow_pickle=False)
  with gzip.open(scalar, "rb") as f:                     # a 0-d array stays 0-d
    assert f.read() == expected.getvalue()


def test_gzip_zero_tail_longer_than_a_block(tmp_path, monkeypatch):
  # Several copies of the compressed zero block and a remainder: 3 blocks + 100 bytes of zeros.
  monkeypatch.setattr(replay_writer, "_ZERO_BLOCK", 1024)
  arr = np.zeros((3 * 1024 + 100 + 50,), np.uint8)
  arr[:50] = np.arange(1, 51)
  path = str(tmp_path / "a.gz")
  replay_writer._save_gz(path, arr, zero_rows_from=50)  # pylint: disable=protected-access
  expected = io.BytesIO()
  np.save(expected, arr, allow_pickle=False)
  assert gzip.decompress(open(path, "rb").read()) == expected.getvalue()
