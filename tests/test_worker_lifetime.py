"""worker_lifetime.die_with_parent: a pool worker exits when its parent is SIGKILLed."""
import os
import signal
import subprocess
import sys
import time

import pytest

from ccvl_tf.runtime import worker_lifetime

_PARENT = r"""
import concurrent.futures, multiprocessing, os, sys, time
from ccvl_tf.runtime import worker_lifetime

def init(parent_pid):
  worker_lifetime.die_with_parent(parent_pid)

def busy():
  print(os.getpid(), flush=True)  # the worker's stdout is the parent's
  time.sleep(600)  # a worker busy in a task (training, say) when its parent is killed

if __name__ == "__main__":
  ctx = multiprocessing.get_context("spawn")
  with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx, initializer=init,
                                              initargs=(os.getpid(),)) as pool:
    pool.submit(busy).result()
"""


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead
  except FileNotFoundError:
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")
def test_worker_dies_with_its_sigkilled_parent(tmp_path):
  script = tmp_path / "parent.py"
  script.write_text(_PARENT)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [os.path.dirname(os.path.dirname(os.path.abspath(worker_lifetime.__file__)))] +
      [p for p in [os.environ.get("PYTHONPATH")] if p]))
  parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=tmp_path)
  worker = int(parent.stdout.readline())
  assert _alive(worker)
  parent.send_signal(signal.SIGKILL)
  parent.wait()
  deadline = time.monotonic() + 20  # a bounded poll for the kernel's signal, not a timing
  while _alive(worker) and time.monotonic() < deadline:
    time.sleep(0.05)
  alive = _alive(worker)
  if alive:
    os.kill(worker, signal.SIGKILL)
  assert not alive, "the pool worker outlived its SIGKILLed parent"


def test_a_worker_whose_parent_is_already_gone_exits(tmp_path):
  """The race: the expected parent died before the request; the worker must not run on."""
  code = ("import os; from ccvl_tf.runtime import worker_lifetime; "
          "worker_lifetime.die_with_parent(os.getppid() + 1_000_000); print('ran on')")
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                     cwd=os.path.dirname(os.path.dirname(os.path.abspath(
                         worker_lifetime.__file__))))
  if sys.platform.startswith("linux"):
    assert r.returncode == 1 and "ran on" not in r.stdout
  else:
    assert r.returncode == 0
