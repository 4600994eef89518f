"""compare.py --engine=ray: the comparison's units as Ray tasks on a Ray cluster that the test
starts (`ray start --head --block`, one machine, 2 CPUs) and stops (SIGTERM to that process
ends the processes it started). The rows and checkpoints equal those of the local engine; a
rerun skips finished units; a failing unit names itself and its log; the engine's settings are
refused where they do nothing."""
import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import portpicker
import pytest

import ccvl_tf  # noqa: F401
from ccvl_tf.experiments.compare import config as compare_config
from ccvl_tf.experiments.compare import ray_engine
from tests import forked_binary

TINY = ["--suite=gridworld", "--methods=CQL,Fixed-CCVL,CCVL", "--datasets=1%", "--num_steps=3",
        "--eval_episodes=1", "--eval_max_steps=5", "--num_grid_deltas=2", "--num_deltas=2",
        "--bootstrap_reps=50", "--batch_size=8", "--seeds=1", "--threads_per_worker=1"]
# What a result file holds that depends on the machine's load, not on the unit.
TIMINGS = ("train_seconds", "eval_seconds")


def _ray_env():
  """Token authentication with a token of this test's own (RAY_AUTH_TOKEN), for the head and
  the driver alike: nothing is read from or written to ~/.ray."""
  return forked_binary.binary_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))


class _Head:
  """A one-machine Ray cluster: `ray start --head --block` in its own process."""

  def __init__(self, env, num_cpus=2):
    # A short temp dir: Ray's socket paths must stay under the OS limit of 107 characters.
    self.tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    self.log = open(os.path.join(self.tmp, "head.log"), "w+")
    ray_cli = os.path.join(os.path.dirname(sys.executable), "ray")
    # Free ports for every port Ray would otherwise take a fixed default for (10001, 52365),
    # so that another Ray on the machine does not collide with this one.
    self.proc = subprocess.Popen(
        [ray_cli, "start", "--head", "--block", "--port=0", f"--num-cpus={num_cpus}",
         "--num-gpus=0", "--object-store-memory=100000000", "--include-dashboard=false",
         f"--ray-client-server-port={portpicker.pick_unused_port()}",
         f"--dashboard-agent-listen-port={portpicker.pick_unused_port()}",
         f"--temp-dir={self.tmp}/t"], env=env, stdout=self.log, stderr=subprocess.STDOUT)
    self.address = None
    deadline = time.time() + 120
    while self.address is None and time.time() < deadline and self.proc.poll() is None:
      time.sleep(0.5)
      self.log.seek(0)
      m = re.search(r"ray start --address='([^']+)'", self.log.read())
      self.address = m and m.group(1)
    assert self.address, f"ray start --head did not come up: {open(self.log.name).read()}"

  def stop(self):
    self.proc.send_signal(signal.SIGTERM)  # --block: ends the processes it started
    try:
      self.proc.wait(timeout=60)
    finally:
      self.log.close()
      shutil.rmtree(self.tmp, ignore_errors=True)


def _rows(out):
  """{result file: its row without the timings} of a comparison's output directory."""
  rows = {}
  for root, _, files in os.walk(os.path.join(out, "results")):
    for f in files:
      row = json.load(open(os.path.join(root, f)))
      rows[os.path.relpath(os.path.join(root, f), out)] = {
          k: v for k, v in row.items() if k not in TIMINGS}
  return rows


@pytest.mark.slow
def test_ray_engine_gives_the_local_rows_resumes_and_names_a_failing_unit(tmp_path):
  env = _ray_env()
  head = _Head(env)
  try:
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"

    def on_ray():  # the tiny comparison on the test's cluster, into ray_out
      return forked_binary.run("compare.py", [*TINY, "--engine=ray",
                                              f"--ray_address={head.address}",
                                              f"--output_dir={ray_out}"],
                               cwd=tmp_path, env=env, fresh=True)

    r = on_ray()
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 to run as Ray tasks, one per run." in r.stdout
    assert "on a Ray cluster of 1 node(s), 2 CPU, 0 GPU; each unit 1 CPU, 0 GPU." in r.stdout
    assert "[3/3]" in r.stdout and "Gym has been unmaintained" not in r.stdout + r.stderr

    # The same units in this machine's local engine: the same rows (scores, episode scores,
    # the CCVL diagnostics and Fixed-CCVL's chosen delta, computed from the trained networks)
    # and bit-identical checkpoints.
    rl = forked_binary.run("compare.py", [*TINY, f"--output_dir={local_out}"], cwd=tmp_path)
    assert rl.returncode == 0, rl.stderr[-3000:]
    ray_rows, local_rows = _rows(ray_out), _rows(local_out)
    assert len(ray_rows) == 3 and ray_rows == local_rows
    assert ray_rows["results/ccvl/1pct/gridworld/seed_0.json"]["diagnostics"]
    assert open(ray_out / "scores.csv").read().count("\n") == 4
    data = sorted(p.relative_to(ray_out / "runs") for p in (ray_out / "runs").rglob("*.data-*"))
    assert data and sorted(os.listdir(ray_out / "runs")) == ["ccvl", "cql"]
    for rel in data:
      assert (ray_out / "runs" / rel).read_bytes() == (local_out / "runs" / rel).read_bytes()

    # Resumable: with one result file removed, a rerun runs that unit only.
    kept = {p: os.path.getmtime(p) for p in (ray_out / "results").rglob("*.json")}
    cql = ray_out / "results" / "cql" / "1pct" / "gridworld" / "seed_0.json"
    del kept[cql]
    os.remove(cql)
    r2 = on_ray()
    assert r2.returncode == 0, r2.stderr[-3000:]
    assert "2 already done (skipped), 1 to run as Ray tasks" in r2.stdout
    assert "[1/1] CQL 1% gridworld seed 0" in r2.stdout
    assert all(os.path.getmtime(p) == t for p, t in kept.items())
    assert _rows(ray_out) == local_rows

    # A unit that raises in its Ray task reaches the user as one error naming it and its log.
    fail = tmp_path / "fail"
    # lr 1e12 (the largest a float setting takes): CCVL's loss is non-finite at step 1.
    r3 = forked_binary.run("compare.py", [*TINY, "--methods=CCVL", "--learning_rate=1e12",
                                          "--engine=ray", f"--ray_address={head.address}",
                                          f"--output_dir={fail}"],
                           cwd=tmp_path, env=env, fresh=True)
    tail = r3.stderr.strip().splitlines()[-1]
    assert r3.returncode == 1, r3.stderr[-3000:]
    assert tail.startswith("compare.py: error: CCVL on 1% gridworld seed 0 failed in a "
                           "worker: TrainingStopped"), tail
    assert "non-finite" in tail and f"log: {fail}/logs/ccvl_1pct_gridworld_seed0.log" in tail
    assert "rerun the same command to resume" in tail

    # A GPU per unit on a cluster without one: refused at once (Ray would wait forever).
    r4 = forked_binary.run("compare.py", [*TINY, "--engine=ray", f"--ray_address={head.address}",
                                          "--ray_num_gpus=1", f"--output_dir={tmp_path / 'gpu'}"],
                           cwd=tmp_path, env=env, fresh=True)
    assert r4.returncode == 1
    assert r4.stderr.strip().splitlines()[-1] == (
        f"compare.py: error: no node of the Ray cluster ({head.address}) has the 1 CPU(s) "
        "(--threads_per_worker) and 1 GPU(s) (--ray_num_gpus) one unit asks for; its nodes "
        "have: 2 CPU, 0 GPU")
  finally:
    head.stop()
  assert head.proc.returncode is not None


def test_engine_settings_are_refused_where_they_do_nothing():
  base = dict(suite="gridworld", output_dir="x")
  with pytest.raises(ValueError, match="--engine must be one of local, ray, got 'dask'"):
    compare_config.CompareConfig(**base, engine="dask").validate()
  with pytest.raises(ValueError, match="--ray_address is a setting of --engine=ray"):
    compare_config.CompareConfig(**base, ray_address="auto").validate()
  with pytest.raises(ValueError, match="--ray_num_gpus is a setting of --engine=ray"):
    compare_config.CompareConfig(**base, ray_num_gpus=0.5).validate()
  with pytest.raises(ValueError, match="--workers=2 sizes the local process pool"):
    compare_config.CompareConfig(**base, engine="ray", workers=2).validate()
  for gpus in (-0.5, 1.5, float("nan"), float("inf")):
    with pytest.raises(ValueError, match="--ray_num_gpus must be a fraction in"):
      compare_config.CompareConfig(**base, engine="ray", ray_num_gpus=gpus).validate()
  for gpus in (0.0, 0.25, 1.0, 2.0):
    compare_config.CompareConfig(**base, engine="ray", ray_num_gpus=gpus).validate()


def test_worker_env_is_the_pools_and_shares_a_gpu_with_memory_growth(monkeypatch):
  monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
  monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
  monkeypatch.delenv("CCVL_VERBOSE", raising=False)
  env = ray_engine.worker_env(0.0)
  assert env["TF_USE_LEGACY_KERAS"] == "1" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
  assert "CCVL_VERBOSE" not in env and "TF_FORCE_GPU_ALLOW_GROWTH" not in env
  assert ray_engine.worker_env(0.5)["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
  assert "TF_FORCE_GPU_ALLOW_GROWTH" not in ray_engine.worker_env(1.0)


def test_paths_sent_to_the_workers_are_absolute(tmp_path, monkeypatch):
  # A Ray worker does not run in the driver's working directory; a URL stays as given.
  monkeypatch.chdir(tmp_path)
  cfg = compare_config.CompareConfig(suite="minatar", output_dir="out", data_dir="data")
  shared_paths = ray_engine._shared_paths  # pylint: disable=protected-access
  sent = shared_paths(cfg)
  assert (sent.output_dir, sent.data_dir) == (str(tmp_path / "out"), str(tmp_path / "data"))
  url = dataclasses.replace(cfg, suite="atari", data_dir="gs://atari-replay-datasets/dqn")
  assert shared_paths(url).data_dir == "gs://atari-replay-datasets/dqn"


def test_an_address_where_nothing_answers_is_refused_at_once_naming_the_flag():
  """Ray retries an address where no head answers for minutes; the run is refused first."""
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  t0 = time.time()
  with pytest.raises(ValueError, match=rf"--ray_address=127.0.0.1:{port}: no Ray head answers "
                                       rf"there within 2 s \(ConnectionRefusedError"):
    ray_engine.check_reachable(f"127.0.0.1:{port}", timeout_s=2)
  assert time.time() - t0 < 2
  with pytest.raises(ValueError, match=r"--ray_address=headnode: expected auto, local or "
                                       r"HOST:PORT"):
    ray_engine.check_reachable("headnode")
  with socket.socket() as s:  # a listening port is taken as reachable
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    ray_engine.check_reachable(f"127.0.0.1:{s.getsockname()[1]}")
    ray_engine.check_reachable(f"ray://127.0.0.1:{s.getsockname()[1]}")
  for left_to_ray in (None, "", "auto", "local"):
    ray_engine.check_reachable(left_to_ray)
