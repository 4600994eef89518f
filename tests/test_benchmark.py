"""Smoke test of binaries/benchmark.py (--quick) in a temp dir."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_benchmark_quick_writes_json(tmp_path):
  """--quick runs the train-step benchmark and, when ccvl_tf/bench/data.py exists, merges its
  run(quick=True) dict under 'data'."""
  out = tmp_path / "sub" / "bench.json"
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, "binaries", "benchmark.py"), f"--output={out}",
       "--quick"],
      cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(out.read_text())
  ms = result["train_step_ms"]
  assert ms["dqn"] > 0 and ms["ccvl"] > 0
  assert result["ratio_ccvl_over_dqn"] == pytest.approx(
      result["variants"]["ccvl_default"]["ratio_over_dqn"])
  assert set(result["variants"]) == {"ccvl_default", "ccvl_no_dr3"}
  assert result["setup"]["quick"] is True
  has_data = os.path.exists(os.path.join(ROOT, "ccvl_tf", "bench", "data.py"))
  assert ("data" in result) == has_data
  if has_data:
    assert isinstance(result["data"], dict) and result["data"]


def test_benchmark_skip_data(tmp_path):
  out = tmp_path / "bench.json"
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, "binaries", "benchmark.py"), f"--output={out}",
       "--quick", "--skip_data"],
      cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "data" not in json.loads(out.read_text())


def test_benchmark_requires_output(tmp_path):
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, "binaries", "benchmark.py"), "--quick"],
      cwd=str(tmp_path), capture_output=True, text=True, timeout=120,
      env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode != 0
  assert "output" in proc.stderr
