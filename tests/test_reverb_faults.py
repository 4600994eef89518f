"""Fault behaviour of online fine-tuning with real processes on localhost (no sleeps: bounded
polls on files and process states; every process is killed in a finally block).

* the Reverb server process killed -9 mid-run -> the learner and the actor stop with an error
  naming the server's address, and the learner's last checkpoint still restores (into a
  fresh learner, every object consumed);
* the learner killed -9 -> its actors exit by themselves; a restart resumes from the last
  learner checkpoint at exactly its step and finishes;
* the learner's calls to the server have deadlines: a frozen server (SIGSTOP) makes
  a Reverb checkpoint end with ServerLost at its deadline, and a server killed -9 in the middle
  of a weight push ends the push with ServerLost naming the address within the deadline (plus
  one ServerInfo check when the call fails at once); call_with_deadline by itself.
(An actor killed mid-run is tested in tests/test_online.py, with the end-to-end run.)
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINETUNE = os.path.join(REPO, "binaries", "finetune_online.py")
SERVER = os.path.join(REPO, "binaries", "reverb_server.py")
SMALL = ["--game=gridworld", "--batch_size=16", "--samples_per_insert=4", "--min_replay_size=32",
         "--replay_capacity=5000", "--log_interval=10", "--eval_episodes=0",
         "--noexport_policies", "--actor_update_period=20", "--push_period=5",
         "--server_timeout_s=3", "--sample_timeout_s=5"]


def _env():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
  return env


def _spawn(args, log_path):
  out = open(log_path, "w")
  proc = subprocess.Popen([sys.executable] + args, stdout=out, stderr=subprocess.STDOUT,
                          env=_env(), cwd=REPO)
  proc._log_file = out  # closed in _cleanup
  return proc


def _read(path):
  with open(path) as f:
    return f.read()


def _tails(procs=(), logs=()):
  """The last lines of each process's log and of the given log files (a failure keeps them)."""
  paths = [p._log_file.name for p in procs] + list(logs)  # pylint: disable=protected-access
  return "".join(f"\n--- {path} ---\n{_read(path)[-2000:]}" for path in paths
                 if os.path.exists(path))


def _wait_exit(proc, timeout, what, logs=()):
  """proc's exit code; on a timeout, an AssertionError with the logs instead of a bare
  TimeoutExpired (a rare failure of the server-kill test left nothing to read)."""
  try:
    return proc.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    raise AssertionError(f"{what}: still running after {timeout}s" + _tails([proc], logs))


def _wait_for(cond, timeout, what, procs=(), logs=()):
  """Polls `cond` (with a short blocking wait on a process instead of sleeping)."""
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    value = cond()
    if value:
      return value
    for p in procs:
      if p.poll() is not None:
        raise AssertionError(f"process {p.args} exited with {p.returncode} while waiting for "
                             f"{what}:\n{_read(p._log_file.name)[-3000:]}")
    if procs:
      try:
        procs[0].wait(timeout=0.25)
      except subprocess.TimeoutExpired:
        pass
    else:
      threading.Event().wait(0.25)
  raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                       + _tails(procs, logs))


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:  # a zombie child of ours counts as gone
    with open(f"/proc/{pid}/stat") as f:
      return f.read().split()[2] != "Z"
  except FileNotFoundError:
    return False


def _cleanup(procs, extra_pids=()):
  for p in procs:
    if p.poll() is None:
      p.kill()
    p.wait(timeout=10)
    p._log_file.close()
  for pid in extra_pids:
    if _alive(pid):
      os.kill(pid, signal.SIGKILL)


def _latest_step(ckpt_dir):
  import tensorflow as tf  # after conftest set TF_USE_LEGACY_KERAS
  path = tf.train.latest_checkpoint(ckpt_dir)
  return (int(path.rsplit("-", 1)[1]), path) if path else (None, None)


@pytest.fixture(scope="module")
def offline_dir(tmp_path_factory):
  from ccvl_tf.experiments.online import start as online_start
  d = str(tmp_path_factory.mktemp("offline"))
  online_start.train_offline_gridworld(d, num_steps=100, seed=0, log=lambda s: None)
  return d


def _actor_pids(root):
  path = os.path.join(root, "status.json")
  if not os.path.exists(path):
    return None
  return json.loads(_read(path))["actor_pids"]


@pytest.mark.slow
def test_a_standalone_server_at_another_samples_per_insert_is_refused(offline_dir, tmp_path):
  """reverb_server.py at --samples_per_insert=2, the learner at 4 (SMALL): one line naming
  both, before any actor starts."""
  import portpicker
  port = portpicker.pick_unused_port()
  procs = []
  try:
    server = _spawn([SERVER, "--game=gridworld", f"--port={port}", "--batch_size=16",
                     "--samples_per_insert=2", "--min_replay_size=32", "--replay_capacity=5000"],
                    str(tmp_path / "server.log"))
    procs.append(server)
    _wait_for(lambda: "Reverb server at" in _read(server._log_file.name), 60,
              "the server to start", [server])
    root = tmp_path / "run"
    learner = _spawn([FINETUNE, f"--offline_dir={offline_dir}", f"--root_dir={root}",
                      f"--reverb_address=localhost:{port}", "--num_env_steps=400"] + SMALL,
                     str(tmp_path / "learner.log"))
    procs.append(learner)
    code = _wait_exit(learner, 120, "the learner")
    out = _read(learner._log_file.name)
    assert code == 1, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"finetune_online.py: error: the Reverb server at localhost:{port} "
                           f"runs another 'replay' table than this learner's: "
                           f"samples_per_insert 2 (this learner's --samples_per_insert give 4)"
                           ), last
    assert "Traceback" not in out and not (root / "actors").exists()
  finally:
    _cleanup(procs)


@pytest.mark.slow
def test_server_killed_stops_learner_and_actor_with_the_address(offline_dir, tmp_path):
  import portpicker
  import tensorflow as tf
  port = portpicker.pick_unused_port()
  address = f"localhost:{port}"
  root = str(tmp_path / "run")
  procs, actor_pids = [], []
  try:
    server = _spawn([SERVER, "--game=gridworld", f"--port={port}", "--batch_size=16",
                     "--samples_per_insert=4", "--min_replay_size=32", "--replay_capacity=5000",
                     f"--checkpoint_dir={tmp_path / 'reverb'}"], str(tmp_path / "server.log"))
    procs.append(server)
    _wait_for(lambda: "Reverb server at" in _read(server._log_file.name), 60,
              "the server to start", [server])
    # The one-line security note names the port (it is open on every interface).
    _wait_for(lambda: f"anyone who can reach port {port}" in _read(server._log_file.name), 10,
              "the server's security note", [server])
    learner = _spawn([FINETUNE, f"--offline_dir={offline_dir}", f"--root_dir={root}",
                      f"--reverb_address={address}", "--num_env_steps=100000",
                      "--checkpoint_interval=10"] + SMALL, str(tmp_path / "learner.log"))
    procs.append(learner)
    ckpt_dir = os.path.join(root, "checkpoints")
    _wait_for(lambda: _latest_step(ckpt_dir)[0], 120, "a learner checkpoint", [learner])
    actor_pids = _actor_pids(root)
    server.kill()                                   # SIGKILL: no goodbye to the clients
    server.wait(timeout=10)
    # Bounded: no hang on the dead server (detection takes ~10 s: --sample_timeout_s=5 plus a
    # --server_timeout_s=3 check; the margin is for a loaded machine, where 40 s was exceeded).
    actor_log_path = os.path.join(root, "actors", "actor_0.log")
    code = _wait_exit(learner, 90, "the learner after the server was killed",
                      [server._log_file.name, actor_log_path])
    out = _read(learner._log_file.name)
    assert code != 0
    assert f"lost the Reverb server at {address}" in out, out[-2000:]
    _wait_for(lambda: not any(_alive(p) for p in actor_pids), 20, "the actor to exit",
              logs=[actor_log_path])
    actor_log = _read(actor_log_path)
    assert address in actor_log and "Reverb server" in actor_log, actor_log[-2000:]
    # The learner's checkpoints are intact: the latest restores into a fresh learner built as
    # the run builds it, with assert_consumed() (every saved value has a home, every variable of
    # the learner -- both bounds, Adam, counts, steps -- gets one).
    step, path = _latest_step(ckpt_dir)
    names = [n for n, _ in tf.train.list_variables(path)]
    assert any(n.startswith("upper/") for n in names)
    from ccvl_tf.experiments.online import config as online_config
    from ccvl_tf.experiments.online import runner as online
    with open(os.path.join(root, "online_config.json")) as f:
      cfg = online_config.OnlineConfig.from_record(json.load(f))
    with open(os.path.join(offline_dir, "summary.json")) as f:
      offline = json.load(f)
    tss, act = online_config.specs(cfg.game, cfg.seed)
    fresh = online_config.build_agent(cfg.game, tss, act, cfg.bounds(), seed=cfg.seed,
                               alpha=offline.get("alpha", offline.get("config", {}).get("alpha")))
    offline_step = tf.Variable(-1, dtype=tf.int64, trainable=False)
    env_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    saved_kernel = tf.train.load_checkpoint(path).get_tensor(
        "upper/online/0/.ATTRIBUTES/VARIABLE_VALUE")                  # Q_u's first kernel
    upper_kernel = fresh.upper._online_vars[0]  # pylint: disable=protected-access
    assert not np.allclose(upper_kernel.numpy(), saved_kernel)        # a fresh initialization
    fresh.make_checkpoint(offline_step=offline_step,   # + the gridworld's grown n(s)
                          online_env_steps=env_steps,
                          online_counts=online.online_config.gridworld_counts()).restore(
                              path).assert_consumed()
    assert int(fresh.train_step_counter.numpy()) == step
    assert int(fresh.upper.train_step_counter.numpy()) == step
    assert int(offline_step.numpy()) == 100
    assert int(env_steps.numpy()) >= 32  # the actor's env steps, at least the min size
    np.testing.assert_array_equal(upper_kernel.numpy(), saved_kernel)
  finally:
    _cleanup(procs, actor_pids or [])


@pytest.mark.slow
def test_learner_killed_and_restarted_resumes_at_its_last_checkpoint(offline_dir, tmp_path):
  root = str(tmp_path / "run")
  args = [FINETUNE, f"--offline_dir={offline_dir}", f"--root_dir={root}",
          "--checkpoint_interval=10"] + SMALL
  procs, actor_pids = [], []
  try:
    first = _spawn(args + ["--num_env_steps=100000"], str(tmp_path / "first.log"))
    procs.append(first)
    ckpt_dir = os.path.join(root, "checkpoints")
    # Learner checkpoint 120 is written after the Reverb checkpoint of step 110 returned
    # (runner._save: learner, then Reverb), so a Reverb checkpoint holding the online items is
    # complete when we kill. Waiting for 110 only raced the Reverb checkpoint of 110 (it
    # failed once under load: the restart found the replay empty).
    _wait_for(lambda: (_latest_step(ckpt_dir)[0] or 0) >= 120, 120, "a learner checkpoint",
              [first])
    actor_pids = _actor_pids(root)
    first.kill()                                     # kill -9
    first.wait(timeout=10)
    _wait_for(lambda: not any(_alive(p) for p in actor_pids), 20,
              "the orphaned actor to exit")
    step, path = _latest_step(ckpt_dir)
    # 100 offline steps; the restart's budget: 400 env steps, counted on from the checkpoint's.
    second = _spawn(args + ["--num_env_steps=400"], str(tmp_path / "second.log"))
    procs.append(second)
    code = second.wait(timeout=150)
    out = _read(second._log_file.name)
    assert code == 0, out[-3000:]
    assert re.search(rf"Resumed from {re.escape(path)} \(train step {step}\)", out), out[-3000:]
    assert "Restored the offline checkpoint" not in out
    # The in-process server came back from its own checkpoint (taken with each learner one).
    items = int(re.search(r"Reverb replay table at \S+: (\d+) items", out).group(1))
    assert items >= 32, out[-3000:]
    summary = json.loads(_read(os.path.join(root, "summary.json")))
    assert summary["start_step"] == step and summary["offline_step"] == 100
    assert summary["step"] > step and summary["online_env_steps"] >= 400
  finally:
    _cleanup(procs, actor_pids or [])


# ---- deadlines on the learner's calls ----------------------------------------------
def test_call_with_deadline_returns_raises_or_times_out_naming_the_server():
  from ccvl_tf.data import reverb_replay
  assert reverb_replay.call_with_deadline(lambda: 42, "h:1", 5.0, "the answer") == 42
  with pytest.raises(KeyError, match="own error"):
    reverb_replay.call_with_deadline(lambda: {}["own error"], "h:1", 5.0, "a lookup")
  never, started = threading.Event(), threading.Event()
  t0 = time.monotonic()
  with pytest.raises(reverb_replay.DeadlineExceeded,
                     match=r"server at h:1 did not complete the hang within its deadline of "
                           r"0\.5s"):
    reverb_replay.call_with_deadline(never.wait, "h:1", 0.5, "the hang", started)
  assert started.is_set() and 0.5 <= time.monotonic() - t0 < 5.0
  never.set()  # let the worker thread end
  with pytest.raises(ValueError, match="timeout_s"):
    reverb_replay.call_with_deadline(lambda: 1, "h:1", 0.0, "x")


_SERVER_SCRIPT = """
import sys, threading
import ccvl_tf
import tensorflow as tf
from ccvl_tf.data import reverb_replay
tables = reverb_replay.make_tables(tf.TensorSpec([1, 2], tf.float32),
                            {"train_step": tf.TensorSpec([], tf.int64),
                             "w": tf.TensorSpec([3], tf.float32)},
                            max_size=10, min_size=1, batch_size=1)
server, address = reverb_replay.start_server(tables, 0, sys.argv[1])
print("Reverb server at", address, flush=True)
threading.Event().wait()
"""


@pytest.mark.slow
def test_server_killed_mid_push_and_frozen_mid_checkpoint_end_with_server_lost(tmp_path):
  """A real server process: a Reverb checkpoint while it is frozen (SIGSTOP) ends with
  ServerLost at --reverb_checkpoint_timeout_s; a weight push in flight when it is killed -9
  ends with ServerLost naming the address within --server_timeout_s (the deadline, or the
  failed call plus one ServerInfo check of the same deadline)."""
  import tensorflow as tf
  from ccvl_tf.experiments.online import server as online_server
  deadline = 2.0
  procs = []
  try:
    server = _spawn(["-c", _SERVER_SCRIPT, str(tmp_path / "reverb")], str(tmp_path / "s.log"))
    procs.append(server)
    _wait_for(lambda: "Reverb server at" in _read(server._log_file.name), 60,
              "the server to start", [server])
    address = _read(server._log_file.name).split("Reverb server at")[1].split()[0]
    link = online_server.LearnerServerLink(address, server_timeout_s=deadline,
                                           checkpoint_timeout_s=deadline)
    variables = {"train_step": tf.Variable(3, dtype=tf.int64), "w": tf.Variable([1.0, 2, 3])}
    link.connect(variables, step=3)                        # container + first push
    assert link.checkpoint(3).startswith(str(tmp_path / "reverb"))
    # Frozen: the checkpoint call cannot return; the deadline ends it.
    server.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(online_server.ServerLost) as lost:
      link.checkpoint(7)
    elapsed = time.monotonic() - t0
    assert deadline <= elapsed < deadline + 10, elapsed
    assert str(lost.value) == (
        f"learner: lost the Reverb server at {address} at train step 7: the Reverb checkpoint "
        f"did not return within --reverb_checkpoint_timeout_s=2s")
    # Killed mid-push: the push is in flight (its worker has called container.push) when the
    # still-frozen server is killed -9.
    in_flight, outcome = threading.Event(), {}
    push = link.container.push
    link.container.push = lambda values: (in_flight.set(), push(values))[1]

    def learner_push():
      t = time.monotonic()
      try:
        link.push(9)
      except Exception as e:  # pylint: disable=broad-except
        outcome["error"] = e
      outcome["seconds"] = time.monotonic() - t

    thread = threading.Thread(target=learner_push, daemon=True)
    thread.start()
    assert in_flight.wait(30), "the push never started"
    server.kill()
    server.wait(timeout=10)
    thread.join(2 * deadline + 10)
    assert not thread.is_alive(), "the push did not end"
    err = outcome.get("error")
    assert isinstance(err, online_server.ServerLost), repr(err)
    assert str(err).startswith(f"learner: lost the Reverb server at {address} at train step 9")
    assert outcome["seconds"] < 2 * deadline + 10, outcome
  finally:
    for p in procs:
      if p.poll() is None:
        p.send_signal(signal.SIGCONT)
    _cleanup(procs)


def test_a_sample_blocked_on_a_killed_server_ends_with_server_lost(tmp_path):
  """A sample stream whose server died can block for ever: the learner's sample runs under a
  deadline and then names the lost server (here: an iterator that never returns, and a
  server that is gone)."""
  import tensorflow as tf
  from ccvl_tf.data import reverb_replay
  from ccvl_tf.experiments.online import config as online_config
  from ccvl_tf.experiments.online import runner as online
  cfg = online_config.OnlineConfig(game="gridworld", min_replay_size=4, samples_per_insert=2.0,
                                   batch_size=4, replay_capacity=1000, sample_timeout_s=0.5,
                                   server_timeout_s=0.5, root_dir=str(tmp_path))
  srv, address = reverb_replay.start_server(online_config.make_server_tables(cfg))
  runner = online._Runner(cfg, lambda s: None, tf.distribute.get_strategy())  # pylint: disable=protected-access
  runner.address = address
  runner.link = online.online_server.LearnerServerLink(address, 0.5, 0.5)
  srv.stop()
  never = threading.Event()

  def blocked():
    never.wait()
    yield None

  outcome = {}

  def sample():
    try:
      # `online` not None: the asynchronous schedule (None is the deterministic one's).
      runner._next_batch((), blocked(), None, 7)  # pylint: disable=protected-access
    except Exception as e:  # pylint: disable=broad-except
      outcome["error"] = e

  worker = threading.Thread(target=sample, daemon=True)
  worker.start()
  worker.join(timeout=60)  # a bound, not a sleep: the deadline is 1 s, the check 0.5 s
  never.set()
  assert not worker.is_alive(), "the sample is still blocked"
  assert isinstance(outcome.get("error"), online.ServerLost), outcome
  assert f"lost the Reverb server at {address} at train step 7" in str(outcome["error"])
