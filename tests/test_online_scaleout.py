"""binaries/online_scaleout.py on the gridworld: an external reverb_server.py, the learner with
one actor process, the throughput record (scaleout.json / scaleout.md)."""
import json
import os
import subprocess
import sys

import pytest

import ccvl_tf  # noqa: F401

from ccvl_tf.experiments.online import start as online_start

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_scaleout_with_an_external_server_records_both_sides(tmp_path):
  offline = str(tmp_path / "offline")
  online_start.train_offline_gridworld(offline, num_steps=20, seed=0, log=lambda s: None)
  out = str(tmp_path / "scale")
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  r = subprocess.run(
      [sys.executable, os.path.join(REPO, "binaries", "online_scaleout.py"),
       f"--offline_dir={offline}", "--game=gridworld", f"--output_dir={out}", "--actors=1",
       "--num_env_steps=300", "--min_replay_size=32", "--batch_size=16"],
      capture_output=True, text=True, env=env, cwd=REPO, timeout=400)
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  record = json.load(open(os.path.join(out, "scaleout.json")))
  (tp,) = record["runs"]
  # Until the actor's 300 env steps (replay inserts), checked at every weight push (every 10
  # learner steps): about (300 - 32) x SPI 8 / batch 16 = 134 learner steps after the offline 20.
  steps = tp["learner_steps"]
  assert tp["num_actors"] == 1 and steps > 0 and (20 + steps) % 10 == 0
  assert tp["replay/inserts"] >= 300 and tp["replay/samples"] >= steps * 16
  assert tp["steady_learner_steps_per_s"] > 0 and 0 <= tp["actors/insert_share"] <= 1
  assert "| 1 | " in open(os.path.join(out, "scaleout.md")).read()
  server_log = open(os.path.join(out, "actors_1", "reverb_server.log")).read()
  assert "Reverb server at" in server_log  # the learner used the external server
  learner_log = open(os.path.join(out, "actors_1", "learner.log")).read()
  assert "Reverb server in this process" not in learner_log
