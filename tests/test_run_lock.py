"""One process per run directory (ccvl_tf/runtime/run_lock.py), with real processes: a child holds a
run directory's lock; a second taker (in this process, and train_offline.py) is refused with
one line naming the directory and the holder; the lock is released when the holder ends
normally and when it is killed with SIGKILL."""
import json
import os
import signal
import socket
import subprocess
import sys
import types

import pytest

from ccvl_tf.runtime import run_lock
from tests import forked_binary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "binaries", "train_offline.py")
TESTDATA = os.path.join(ROOT, "testdata", "dqn_replay", "Breakout", "1", "replay_logs")

# Runs train_offline.py (argv[1:]) in this process with run_lock.hold and the flock itself
# counted; prints the counts at exit.
COUNTED_TRAIN = """
import atexit, runpy, sys
from ccvl_tf.runtime import run_lock
counts = {"hold": 0, "flock": 0}
real_hold, real_lock = run_lock.hold, run_lock._lock
def hold(*args, **kwargs):
  counts["hold"] += 1
  return real_hold(*args, **kwargs)
def lock(*args, **kwargs):
  counts["flock"] += 1
  return real_lock(*args, **kwargs)
run_lock.hold, run_lock._lock = hold, lock
atexit.register(lambda: print("LOCK COUNTS", counts["hold"], counts["flock"], flush=True))
sys.argv = [TRAIN] + sys.argv[1:]
runpy.run_path(TRAIN, run_name="__main__")
"""

# Holds the lock of argv[1] until a line arrives on stdin (or it is killed).
HOLDER = """
import sys
from ccvl_tf.runtime import run_lock
with run_lock.hold(sys.argv[1], "--root_dir"):
  print("HELD", flush=True)
  sys.stdin.readline()
print("RELEASED", flush=True)
"""


def _holder(run_dir):
  proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True, cwd=ROOT)
  assert proc.stdout.readline() == "HELD\n"
  return proc


def _refusal(run_dir, pid):
  return (f"--root_dir {run_dir} is in use by another process: pid {pid} on "
          f"{socket.gethostname()}, started ")


@pytest.mark.slow
def test_a_second_process_is_refused_naming_the_holder_and_sigkill_releases_it(tmp_path):
  run_dir = tmp_path / "run"
  holder = _holder(run_dir)
  try:
    with pytest.raises(run_lock.RunDirectoryInUse) as e:
      with run_lock.hold(str(run_dir), "--root_dir"):
        pass
    msg = str(e.value)
    assert msg.startswith(_refusal(run_dir, holder.pid)), msg
    assert "-c" in msg and str(run_dir) in msg  # the holder's command line
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    r = forked_binary.run("train_offline.py", [f"--root_dir={run_dir}", "--num_steps=1",
                                               "--reference_agents=none"], cwd=tmp_path, env=env)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "train_offline.py: error: " + _refusal(run_dir, holder.pid)), r.stderr[-2000:]
    assert sorted(os.listdir(run_dir)) == ["run.lock"]  # nothing of a run was written
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert holder.returncode == -signal.SIGKILL
  with run_lock.hold(str(run_dir), "--root_dir") as path:  # the kernel released it
    assert json.loads(open(path).read())["pid"] == os.getpid()


def test_the_lock_is_released_when_its_holder_ends_and_is_reentrant(tmp_path):
  run_dir = tmp_path / "run"
  holder = _holder(run_dir)
  holder.stdin.write("go\n")
  holder.stdin.flush()
  assert holder.stdout.readline() == "RELEASED\n"
  assert holder.wait() == 0
  assert not run_dir.exists()  # made by the holder, which wrote nothing there: removed
  with run_lock.hold(str(run_dir)) as path:
    with run_lock.hold(str(run_dir)):  # the same process again: allowed
      pass
    assert json.loads(open(path).read())["pid"] == os.getpid()  # still held and recorded
    other = subprocess.run([sys.executable, "-c", HOLDER, str(run_dir)], capture_output=True,
                           text=True, cwd=ROOT, input="")
    assert other.returncode != 0
    assert _refusal(run_dir, os.getpid()) in other.stderr


def test_a_run_that_wrote_nothing_leaves_the_directory_as_it_found_it(tmp_path):
  made = tmp_path / "made"
  with run_lock.hold(str(made)):
    assert os.listdir(made) == ["run.lock"]
  assert not made.exists()  # made by hold, nothing written: removed
  given = tmp_path / "given"
  given.mkdir()
  with run_lock.hold(str(given)):
    pass
  assert given.is_dir() and os.listdir(given) == []  # the user's empty directory stays
  ran = tmp_path / "ran"
  with run_lock.hold(str(ran)):
    (ran / "summary.json").write_text("{}")
  assert sorted(os.listdir(ran)) == ["run.lock", "summary.json"]
  assert open(ran / "run.lock").read() == ""  # beside outputs: kept, no holder recorded


def test_a_run_directory_that_is_a_file_is_one_line_and_the_file_is_left_as_it_was(tmp_path):
  path = tmp_path / "notes.txt"
  path.write_text("mine")
  with pytest.raises(ValueError, match=r"^--root_dir .*notes\.txt: is a file, expected a "
                                       r"directory \(the run's directory, created when "
                                       r"missing\)$"):
    with run_lock.hold(str(path), "--root_dir"):
      pass
  assert path.read_text() == "mine"


def test_a_lock_file_removed_while_being_taken_is_taken_again_at_its_path(tmp_path,
                                                                         monkeypatch):
  """Its holder removed the lock file between this taker's open and flock (made again by a
  third process): the taker must not hold the unlinked file, else two processes would hold
  'the' lock of one directory."""
  run_dir = tmp_path / "run"
  run_dir.mkdir()
  (run_dir / "keep").write_text("")  # outputs: the lock file of this test is not removed
  path = str(run_dir / "run.lock")
  real_open = os.open
  opened = []

  def open_then_replace(name, *args, **kwargs):
    fd = real_open(name, *args, **kwargs)
    opened.append(name)
    if len(opened) == 1:  # the first open: the file is replaced right after it
      os.unlink(name)
      os.close(real_open(name, os.O_RDWR | os.O_CREAT, 0o644))
    return fd

  monkeypatch.setattr(run_lock.os, "open", open_then_replace)
  with run_lock.hold(str(run_dir)) as held:
    monkeypatch.setattr(run_lock.os, "open", real_open)
    assert opened == [path, path]  # the replaced file was let go and the path opened again
    other = subprocess.run([sys.executable, "-c", HOLDER, str(run_dir)], capture_output=True,
                           text=True, cwd=ROOT, input="")
    assert other.returncode != 0 and _refusal(run_dir, os.getpid()) in other.stderr
    assert json.loads(open(held).read())["pid"] == os.getpid()


def test_a_library_function_below_an_entry_checks_that_its_caller_holds_the_lock(tmp_path):
  run_dir = str(tmp_path / "run")
  assert not run_lock.held(run_dir)
  with pytest.raises(RuntimeError) as e:
    run_lock.require_held(run_dir, "the results table")
  assert str(e.value) == (f"the results table needs --root_dir {run_dir} locked by its caller: "
                          f"call it inside `with run_lock.hold({run_dir!r}, '--root_dir'):` "
                          f"(one process per run directory)")
  with run_lock.hold(run_dir):
    assert run_lock.held(run_dir) and run_lock.held(run_dir + "/.")
    run_lock.require_held(run_dir, "the results table")
  assert not run_lock.held(run_dir)
  assert run_lock.held("gs://bucket/run")  # not locked: nothing to require


def test_runner_run_takes_the_lock_and_the_steps_below_the_binary_need_it_held(
    tmp_path, monkeypatch):
  """A library user calling offline.runner.run alone gets the lock; run_holding_lock and
  compare.offline_table.run (the binary's steps, under the lock it takes once) refuse to run
  without it."""
  from ccvl_tf.experiments.compare import offline_table
  from ccvl_tf.experiments.offline import runner
  root = str(tmp_path / "run")
  plan = types.SimpleNamespace(config=types.SimpleNamespace(root_dir=root))
  cfg = types.SimpleNamespace(root_dir=root)
  held = []
  monkeypatch.setattr(runner, "_run", lambda p, log: held.append(run_lock.held(root)) or "run")
  monkeypatch.setattr(offline_table, "_run", lambda c, trained, log: trained + " and table")
  assert runner.run(plan) == "run" and held == [True]
  assert not run_lock.held(root)
  for step, name in ((lambda: runner.run_holding_lock(plan), "offline.runner.run_holding_lock"),
                     (lambda: offline_table.run(cfg, "run"), "compare.offline_table.run")):
    with pytest.raises(RuntimeError, match=f"^{name} needs --root_dir {root} locked by its "):
      step()
  with run_lock.hold(root):
    assert offline_table.run(cfg, runner.run_holding_lock(plan)) == "run and table"
  assert held == [True, True]


@pytest.mark.slow
def test_train_offline_takes_the_run_lock_once(tmp_path):
  """One process, one lock: the binary holds --root_dir's lock across the run and its results
  table, and nothing below it takes the lock again (run_lock.hold called once, one flock)."""
  root = tmp_path / "run"
  args = [f"--dataset_dir={TESTDATA}", f"--root_dir={root}", "--num_steps=2", "--agent=dqn",
          "--reference_agents=none", "--batch_size=4", "--log_interval=2",
          "--checkpoint_interval=2", "--summary_interval=1", "--eval_episodes=1",
          "--eval_max_steps=30"]
  r = subprocess.run([sys.executable, "-c", f"TRAIN = {TRAIN!r}\n" + COUNTED_TRAIN, *args],
                     capture_output=True, text=True, cwd=tmp_path, timeout=900,
                     env=forked_binary.binary_env())
  assert r.returncode == 0, r.stderr[-3000:]
  assert "LOCK COUNTS 1 1\n" in r.stdout, r.stdout[-3000:]
  assert (root / "summary.json").exists() and (root / "results.md").exists()
