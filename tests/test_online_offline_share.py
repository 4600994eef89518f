"""Fine-tuning on Atari with offline data in its batches (--offline_fraction, experiments/online/
offline_share.py): the offline share comes from the dataset the offline run trained on, each
batch holds round(F x batch) of its transitions after the online ones, and the run's learner
steps train on them; refused clearly when that dataset is gone, replaced, not recorded, or F
gives no mixed batch.

The offline run: train_offline's runner (2 steps, batch 8, N = 2) on a synthetic Breakout-format
dataset of 119 transitions whose every reward is -1 and whose frames are constant images of
value 50-56: a Breakout reward is 0 or +1 (its frames are no such constant images), so each row
of a fine-tuning batch names its source.
"""
import os
import shutil

import ccvl_tf  # noqa: F401

import numpy as np
import pytest

from ccvl_tf.data import frame_store, pipeline, replay_writer
from ccvl_tf.experiments.offline import config as offline_config
from ccvl_tf.experiments.offline import runner as offline_runner
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import distributed
from ccvl_tf.experiments.online import offline_share
from ccvl_tf.experiments.online import runner as online
from tests import run_copies

OFFLINE_REWARD = -1.0
FRAME_VALUES = tuple(range(50, 57))  # the dataset's frames; 0: Dopamine's episode-start padding
BATCH, FRACTION = 8, 0.5
OFFLINE_ROWS = 4  # round(8 x 0.5)


def _write_dataset(path, num_steps=120, episode=30):
  w = replay_writer.DopamineReplayWriter(
      path, replay_capacity=200, metadata={"game": "Breakout", "action_set": [0, 1, 3, 4]})
  for i in range(num_steps):
    w.add(np.full((84, 84), FRAME_VALUES[i % 7], np.uint8), i % 4, OFFLINE_REWARD,
          i % episode == episode - 1)
  w.close()


@pytest.fixture(scope="module")
def atari_offline(tmp_path_factory):
  """(offline run directory, its dataset directory)."""
  base = tmp_path_factory.mktemp("atari_offline")
  data = str(base / "data")
  _write_dataset(data)
  cfg = offline_config.OfflineConfig(
      game="Breakout", root_dir=str(base / "off"), dataset_dir=data, num_steps=2,
      batch_size=8, reference_agents=(), checkpoint_interval=2, log_interval=1,
      eval_interval=0, eval_episodes=1, eval_max_steps=10, eval_env="sequential",
      num_grid_deltas=2, agent_values=dict(num_deltas=2, num_pairs=1), tf_threads=1)
  offline_runner.run(offline_config.resolve(cfg), log=lambda s: None)
  return str(base / "off"), data


def _config(offline_dir, root, **more):
  values = dict(offline_dir=offline_dir, game="Breakout", root_dir=str(root),
                num_env_steps=40, num_actors=1, batch_size=BATCH, offline_fraction=FRACTION,
                samples_per_insert=1.0, min_replay_size=16, replay_capacity=100,
                eval_episodes=0, export_policies=False, penalty_diagnostic=False,
                schedule="deterministic", log_interval=100, checkpoint_interval=1000,
                push_period=1)
  values.update(more)
  return online_config.OnlineConfig(**values)


@pytest.mark.slow
def test_atari_batches_hold_the_offline_runs_data_after_the_online_rows(
    atari_offline, tmp_path, monkeypatch):
  offline_dir, data = atari_offline
  trained = []  # each batch the learner stepped on, and the step's loss
  real = distributed.make_learner_step

  def recording(strategy, agent):
    step = real(strategy, agent)

    def learner_step(batch):
      metrics = step(batch)
      trained.append(({k: np.asarray(v) for k, v in batch.items()}, float(metrics["loss"])))
      return metrics
    return learner_step
  monkeypatch.setattr(distributed, "make_learner_step", recording)
  logs = []
  cfg = _config(offline_dir, tmp_path / "ft")
  summary = online.run(cfg, log=logs.append)

  # 40 env steps, the first sample after 16, 4 online rows per step at SPI 1: (40 - 16) / 4.
  assert summary["offline_step"] == 2 and summary["step"] == 2 + 6
  assert len(trained) == 6
  store = frame_store.FrameStore.from_replay(data, "all", num_actions=4)
  for i, (batch, loss) in enumerate(trained):
    assert np.isfinite(loss)
    assert {k: v.shape[0] for k, v in batch.items()} == {k: BATCH for k in batch}
    from_offline = batch["reward"] == OFFLINE_REWARD
    assert from_offline.tolist() == [False] * (BATCH - OFFLINE_ROWS) + [True] * OFFLINE_ROWS
    assert set(batch["reward"][:BATCH - OFFLINE_ROWS].tolist()) <= {0.0, 1.0}  # Breakout's
    offline = {k: v[BATCH - OFFLINE_ROWS:] for k, v in batch.items()}
    assert set(np.unique(offline["observation"]).tolist()) <= {0, *FRAME_VALUES}
    assert not set(np.unique(batch["observation"][0]).tolist()) <= {0, *FRAME_VALUES}
    # Batch i of the offline stream seeded --seed + SEED_OFFSET: the i-th step since the start.
    expected = pipeline.sample_batch(store, OFFLINE_ROWS, cfg.seed + offline_share.SEED_OFFSET,
                                     i)
    for key, value in expected.items():
      np.testing.assert_array_equal(offline[key], value, err_msg=f"{key} of step {i}")
  assert any(f"Offline share of each batch: {OFFLINE_ROWS} transitions of {data}" in line
             for line in logs), logs


@pytest.mark.slow
def test_a_missing_replaced_or_unrecorded_dataset_is_refused_before_anything_is_written(
    atari_offline, tmp_path):
  offline_dir, data = atari_offline
  cases = [
      (run_copies.copy_run(offline_dir, tmp_path / "gone", dataset_dir=str(tmp_path / "nowhere")),
       r"dataset the offline run trained on \(.*summary.json 'dataset_dir'\), .*nowhere, which "
       r"does not exist"),
      (run_copies.copy_run(offline_dir, tmp_path / "unrecorded", dataset_dir=run_copies.REMOVED),
       r"summary.json records no dataset \('dataset_dir' None, 'subset' 'all'; train_offline.py "
       r"and compare.py write both\): rerun the offline run"),
  ]
  other = str(tmp_path / "other_data")
  _write_dataset(other, num_steps=90)
  cases.append((run_copies.copy_run(offline_dir, tmp_path / "elsewhere", dataset_dir=other),
                r"is not that dataset any more: .*fingerprint.json records its 'dataset' as "
                r".*differing: listing_sha256, path"))
  for run_dir, message in cases:
    root = tmp_path / ("ft_" + os.path.basename(run_dir))
    with pytest.raises(ValueError, match=message):
      online.run(_config(run_dir, root), log=lambda s: None)
    assert not root.exists()
  # The same directory with other contents: another dataset in the offline run's place.
  saved = data + ".saved"
  os.rename(data, saved)
  try:
    _write_dataset(data, num_steps=90)
    root = tmp_path / "ft_replaced"
    with pytest.raises(ValueError, match=r"not that dataset any more: .*differing: "
                                         r"listing_sha256[^,]"):
      online.run(_config(offline_dir, root), log=lambda s: None)
    assert not root.exists()
  finally:
    shutil.rmtree(data, ignore_errors=True)
    os.rename(saved, data)


@pytest.mark.parametrize("fraction, batch, message", [
    (-0.1, 8, r"--offline_fraction .*-0.1"),
    (1.0, 8, r"--offline_fraction .*1"),
    (1.5, 8, r"--offline_fraction .*1.5"),
    # round(8 x 0.05) = 0 offline rows; round(8 x 0.95) = 8, no online row.
    (0.05, 8, r"--offline_fraction=0.05 gives round\(8 x 0.05\) = 0 offline transitions"),
    (0.95, 8, r"--offline_fraction=0.95 gives round\(8 x 0.95\) = 8 offline transitions"),
])
def test_a_fraction_that_mixes_no_batch_is_refused_naming_the_flag(fraction, batch, message):
  with pytest.raises(ValueError, match=message):
    online_config.OnlineConfig(game="Breakout", batch_size=batch,
                               offline_fraction=fraction).validate_settings()


def test_the_offline_rows_of_a_batch_are_round_f_times_batch():
  # By hand: round(32 x 0.25) = 8, round(8 x 0.3) = round(2.4) = 2, round(10 x 0.55) = 6.
  for batch, fraction, offline in ((32, 0.25, 8), (8, 0.3, 2), (10, 0.55, 6), (8, 0.0, 0)):
    cfg = online_config.OnlineConfig(game="Breakout", batch_size=batch,
                                     offline_fraction=fraction)
    cfg.validate_settings()
    assert (cfg.offline_batch_size, cfg.online_batch_size) == (offline, batch - offline)
