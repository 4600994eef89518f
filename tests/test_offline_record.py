"""Fine-tuning reads the offline run's settings from one verified record
(ccvl_tf/experiments/online/offline_record.py): its summary.json, checked against the
checkpoints' own fingerprint.json, with nothing filled in by a default. Before, with the
summary absent (a run stopped before its end) and --game=Atlantis, a Breakout checkpoint was
fine-tuned on Atlantis with |D| 2500, alpha 0.1 and belief temperature 1; a summary without
"game" did the same; num_transitions Infinity was accepted, belief_temperature 0.0 dropped for
1, and a reading other than the checkpoint's accepted."""
import json
import math

import pytest

from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import offline_record
from ccvl_tf.experiments.online import start as online_start

# What train_offline.py writes for a Breakout run (the keys the check reads).
SUMMARY = {"game": "Breakout", "agent": "ccvl", "num_transitions": 49999,
           "belief_temperature": 0.0227, "settings": {"alpha": 3.0},
           "config": {"ccvl_options": {}, "num_deltas": 8, "num_pairs": 2},
           "exported_policies": {"policy": "policy"}}
FINGERPRINT = {"game": "Breakout", "agent": "ccvl", "num_transitions": 49999, "alpha": 3.0,
               "ccvl_options": {}, "num_deltas": 8, "num_pairs": 2, "seed": 0}


def _run_dir(tmp_path, summary=SUMMARY, fingerprint=FINGERPRINT, checkpoint=True):
  ckpt = tmp_path / "off" / "checkpoints"
  ckpt.mkdir(parents=True)
  if checkpoint:
    (ckpt / "ckpt-10.index").write_bytes(b"")
  if fingerprint is not None:
    (ckpt / "fingerprint.json").write_text(json.dumps(fingerprint))
  if summary is not None:
    (tmp_path / "off" / "summary.json").write_text(
        summary if isinstance(summary, str) else json.dumps(summary))
  return tmp_path / "off"


def test_a_consistent_record_is_returned_whole(tmp_path):
  assert offline_record.offline_record(str(_run_dir(tmp_path))) == SUMMARY


def test_checkpoints_without_a_summary_are_refused_naming_both(tmp_path):
  off = _run_dir(tmp_path, summary=None)
  with pytest.raises(ValueError) as e:
    offline_record.offline_record(str(off))
  assert str(e.value).startswith(
      f"{off}/summary.json is missing, but {off}/checkpoints holds checkpoints: the offline run "
      f"stopped before its end"), str(e.value)
  # The probe: the same through the fine-tuning's configuration, with another game.
  cfg = online_config.OnlineConfig(game="Atlantis", offline_dir=str(off),
                                   root_dir=str(tmp_path / "online"))
  with pytest.raises(ValueError, match="summary.json is missing"):
    online_start.resolve_config(cfg, log=lambda s: None)
  # Neither a summary nor a checkpoint: nothing to verify here (the restore names it).
  assert offline_record.offline_record(str(_run_dir(tmp_path / "b", summary=None,
                                                  checkpoint=False, fingerprint=None))) == {}


def test_a_summary_without_its_game_is_refused(tmp_path):
  off = _run_dir(tmp_path, summary={k: v for k, v in SUMMARY.items() if k != "game"})
  cfg = online_config.OnlineConfig(game="Atlantis", offline_dir=str(off),
                                   root_dir=str(tmp_path / "online"))
  with pytest.raises(ValueError, match=r"summary.json has no 'game' \(the game's name, a "
                     r"string\): rerun the offline run to write it again; fine-tuning fills in "
                     r"no default$"):
    online_start.resolve_config(cfg, log=lambda s: None)


@pytest.mark.parametrize("key,text", [
    ("num_transitions", "Infinity"), ("num_transitions", "NaN"), ("num_transitions", "-5"),
    ("belief_temperature", "0.0"), ("belief_temperature", "-1"),
    ("belief_temperature", "Infinity"),
])
def test_a_recorded_size_or_temperature_that_is_not_finite_and_positive_is_refused(
    tmp_path, key, text):
  body = json.dumps({k: v for k, v in SUMMARY.items() if k != key})[:-1] + f', "{key}": {text}}}'
  off = _run_dir(tmp_path, summary=body, fingerprint={k: v for k, v in FINGERPRINT.items()
                                                      if k != key})
  with pytest.raises(ValueError) as e:
    offline_record.offline_record(str(off))
  value = float(text)
  shown = repr(int(value)) if text.lstrip("-").isdigit() else repr(value)
  assert str(e.value).startswith(f"{off}/summary.json records {key!r} = {shown}, which is not "
                                 f"a finite number > 0" if key == "num_transitions" else
                                 f"{off}/summary.json records {key!r} = {shown}, which is not "
                                 f"a number in (0, 1e+06]"), str(e.value)
  assert not math.isfinite(value) or value <= 0


@pytest.mark.parametrize("change,named", [
    ({"game": "Atlantis"}, "'game' = 'Atlantis', but the checkpoints' {fp} records 'game' = "
                           "'Breakout'"),
    ({"num_transitions": 2489}, "'num_transitions' = 2489, but"),
    ({"settings": {"alpha": 50.0}}, "'settings' 'alpha' = 50.0, but the checkpoints' {fp} "
                                    "records 'alpha' = 3.0"),
    ({"config": {"ccvl_options": {"reading": "bonus"}, "num_deltas": 8, "num_pairs": 2}},
     "'config' 'ccvl_options' = {{'reading': 'bonus'}}, but the checkpoints' {fp} records "
     "'ccvl_options' = {{}}"),
    ({"config": {"ccvl_options": {}, "num_deltas": 4, "num_pairs": 2}},
     "'config' 'num_deltas' = 4, but"),
])
def test_a_summary_that_disagrees_with_its_checkpoints_record_is_refused(tmp_path, change,
                                                                          named):
  off = _run_dir(tmp_path, summary=dict(SUMMARY, **change))
  fp = off / "checkpoints" / "fingerprint.json"
  with pytest.raises(ValueError) as e:
    offline_record.offline_record(str(off))
  assert str(e.value).startswith(f"{off}/summary.json records " + named.format(fp=fp)), \
      str(e.value)
  assert str(e.value).endswith(f"the summary is not this checkpoint's (edited, or copied from "
                               f"another run); restore the run's own summary.json or rerun "
                               f"train_offline.py with --root_dir={off}")


def test_an_unreadable_checkpoint_record_is_named(tmp_path):
  off = _run_dir(tmp_path, fingerprint=None)
  (off / "checkpoints" / "fingerprint.json").write_text('{"game": ')
  with pytest.raises(ValueError, match=r"fingerprint.json \(what the checkpoints beside it "
                     r"were trained with\) cannot be read"):
    offline_record.offline_record(str(off))


def test_an_atari_summary_without_its_dataset_size_is_refused():
  cfg = online_config.OnlineConfig(game="Breakout", offline_dir="off")
  with pytest.raises(ValueError, match=r"^off/summary.json has no 'num_transitions'"):
    online_start.alpha_and_dataset_size({"game": "Breakout", "alpha": 3.0}, cfg)
  # The gridworld's own offline run records none: its dataset's 2,500.
  grid = online_config.OnlineConfig(game="gridworld", offline_dir="off")
  assert online_start.alpha_and_dataset_size({"alpha": 0.2}, grid) == (0.2, 2500.0)


def test_compare_layout_is_checked_against_its_own_fingerprint(tmp_path):
  # compare.py's units: the game as 'suite/Game' in the summary and 'Game' in the
  # fingerprint; alpha and |D| at the top level; the learner's config record flat.
  summary = {"game": "minatar/Breakout", "agent": "ccvl", "alpha": 0.1,
             "num_transitions": 100, "config": {"alpha": 0.1, "num_deltas": 8}}
  fingerprint = {"game": "Breakout", "agent": "ccvl", "alpha": 0.1, "num_deltas": 8,
                 "num_transitions": 100, "batch_size": 32}
  assert offline_record.offline_record(str(_run_dir(tmp_path, summary, fingerprint))) == summary
  off = _run_dir(tmp_path / "b", dict(summary, config={"alpha": 0.1, "num_deltas": 4}),
                 fingerprint)
  with pytest.raises(ValueError, match=r"records 'config' 'num_deltas' = 4, but the "
                     r"checkpoints' .* records 'num_deltas' = 8"):
    offline_record.offline_record(str(off))
  off = _run_dir(tmp_path / "c", dict(summary, game="minatar/Asterix"), fingerprint)
  with pytest.raises(ValueError, match=r"records 'game' = 'Asterix', but"):
    offline_record.offline_record(str(off))
