"""A fine-tuning run's own settings are compared when it resumes or a finished run is rerun
into its --root_dir (OnlineConfig.fingerprint, the class's classification): refused naming
each change (old -> new) before anything is restored or written, or with
--allow_config_change recorded at the train step it took effect. In process: the gridworld's
20-step offline run, one deterministic fine-tune of a few learner steps."""
import json
import os

import ccvl_tf  # noqa: F401

import pytest

from ccvl_tf.runtime import config_flags
from ccvl_tf.runtime import training
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import runner as online
from ccvl_tf.experiments.online import start as online_start


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """(offline_dir, root_dir, the config) of a finished fine-tune at --offline_fraction=0.5."""
  base = tmp_path_factory.mktemp("finetune")
  offline = str(base / "offline")
  online_start.train_offline_gridworld(offline, num_steps=20, seed=0, log=lambda s: None)
  cfg = online_config.OnlineConfig(
      game="gridworld", offline_dir=offline, root_dir=str(base / "online"),
      schedule="deterministic", num_env_steps=40, num_actors=1, batch_size=8,
      offline_fraction=0.5, samples_per_insert=4.0, min_replay_size=16,
      replay_capacity=1000, checkpoint_interval=5, push_period=5, log_interval=100,
      eval_episodes=1, eval_max_steps=10, export_policies=False, penalty_diagnostic=False)
  online.run(cfg, log=lambda s: None)
  return offline, cfg.root_dir, cfg


def _listing(root):
  return {os.path.join(d, n): os.path.getmtime(os.path.join(d, n))
          for d, _, names in os.walk(root) for n in names}


@pytest.mark.parametrize("changes, named", [
    (dict(offline_fraction=0.25), ["offline_fraction: 0.5 -> 0.25"]),
    (dict(offline_fraction=0.0), ["offline_fraction: 0.5 -> 0.0"]),
    (dict(alpha=50.0, learning_rate=0.01, batch_size=16),
     ["alpha: None -> 50.0", "learning_rate: None -> 0.01", "batch_size: 8 -> 16"]),
])
def test_a_finished_run_rerun_with_other_settings_is_refused_naming_each(finished, changes,
                                                                         named):
  """Before: 'Resumed from ckpt-N', 'step N already evaluated' with the old scores, and
  online_config.json / summary.json rewritten with the new values."""
  _, root, cfg = finished
  before = _listing(root)
  with pytest.raises(training.FingerprintMismatch) as e:
    online.run(online_config.OnlineConfig(**{**_fields(cfg), **changes}), log=lambda s: None)
  text = str(e.value)
  for line in named:
    assert line in text, text
  assert text.count(" -> ") == len(named), text       # only the changed settings
  assert "--allow_config_change" in text
  assert _listing(root) == before                      # nothing restored over, nothing written


def test_allow_config_change_records_the_change_at_its_step(finished, tmp_path):
  import shutil
  _, root, cfg = finished
  copy = str(tmp_path / "copy")
  shutil.copytree(root, copy)
  step = json.load(open(os.path.join(root, "summary.json")))["step"]
  logs = []
  summary = online.run(online_config.OnlineConfig(**{
      **_fields(cfg), "root_dir": copy, "offline_fraction": 0.25, "allow_config_change": True}),
                       log=logs.append)
  assert summary["config_changes"] == [
      {"step": step, "changes": ["offline_fraction: 0.5 -> 0.25"]}], summary["config_changes"]
  assert any("Resuming although the run's fingerprint changed" in l for l in logs), logs
  # The same settings again: the change is recorded once; the run started with is kept.
  summary = online.run(online_config.OnlineConfig(**{
      **_fields(cfg), "root_dir": copy, "offline_fraction": 0.25, "allow_config_change": True}),
                       log=lambda s: None)
  assert len(summary["config_changes"]) == 1
  # Every start records the learner's machine (the first from the offline run's 20 steps); a
  # rerun from the finished step supersedes the earlier start's entry from that step.
  from ccvl_tf.runtime import machine
  assert [m["from_step"] for m in summary["machines"]] == [20, step], summary["machines"]
  assert summary["machines"][-1]["cpu"] == machine.cpu()


def test_a_setting_not_compared_may_change(finished, tmp_path):
  import shutil
  _, root, cfg = finished
  copy = str(tmp_path / "copy")
  shutil.copytree(root, copy)
  online.run(online_config.OnlineConfig(**{**_fields(cfg), "root_dir": copy,
                                           "log_interval": 7, "checkpoint_interval": 3}),
             log=lambda s: None)


def test_the_fingerprint_holds_every_compared_setting_and_no_other():
  """A setting classified as compared that the fingerprint left out would be a silent change
  again; one not compared in it would refuse a harmless change."""
  comparison = config_flags.comparison(online_config.OnlineConfig)
  fp = online_config.OnlineConfig(offline_dir="off").fingerprint()
  expected = (set(comparison.compared) - {"exploration_values"}) | set(
      online_config.EXPLORATION_FIELDS)
  assert set(fp) == expected
  assert not set(fp) & set(comparison.not_compared)


def _fields(cfg):
  import dataclasses
  return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
