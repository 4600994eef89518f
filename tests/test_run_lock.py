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

import pytest

from ccvl_tf.runtime import run_lock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "binaries", "train_offline.py")

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
    r = subprocess.run([sys.executable, TRAIN, f"--root_dir={run_dir}", "--num_steps=1",
                        "--reference_agents=none"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=600)
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
  assert open(run_dir / "run.lock").read() == ""  # no holder recorded once released
  with run_lock.hold(str(run_dir)) as path:
    with run_lock.hold(str(run_dir)):  # the same process again: allowed
      pass
    assert json.loads(open(path).read())["pid"] == os.getpid()  # still held and recorded
    other = subprocess.run([sys.executable, "-c", HOLDER, str(run_dir)], capture_output=True,
                           text=True, cwd=ROOT, input="")
    assert other.returncode != 0
    assert _refusal(run_dir, os.getpid()) in other.stderr
