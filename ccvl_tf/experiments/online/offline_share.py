"""The offline share of fine-tuning batches (--offline_fraction F) on Atari and MinAtar:
round(F x batch) transitions of each learner batch drawn from the dataset the offline run
trained on, the rest from the online replay (runner.py concatenates them, online rows first).

The dataset is the one the offline run's summary.json names ('dataset_dir' and 'subset':
train_offline.py's, and compare.py's replay suites', Suite.dataset_record), checked against
what its checkpoints were trained on where their fingerprint.json records it (train_offline.py:
'dataset', the replay directory's listing hash, experiments/offline/dataset.dataset_identity;
compare.py records the dataset kind only) and against |D| (summary.json 'num_transitions'),
and read with the offline run's own loader (experiments/offline/dataset.open_dataset: the
dataset record's suite, game and frame format checked against --game, the memory of the
batches reserved first). Batches come from the offline pipeline (data/pipeline.
transition_dataset): batch i of a run is a function of the seed and i alone, i = learner steps
since the offline start, so a resumed run continues the stream where its checkpoint left it.
The gridworld's offline share is its fixed dataset (start.offline_gridworld_batches).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Optional

import ccvl_tf  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

import tensorflow as tf

from ccvl_tf.data import dataset_record, frame_store, pipeline, replay_files
from ccvl_tf.envs import factory
from ccvl_tf.experiments.offline import dataset as offline_dataset
from ccvl_tf.experiments.offline.seeds import Seeds
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import training

# The offline share's batches are pipeline batches seeded --seed + this offset: a stream of
# its own, apart from the offline run's training order (Seeds.data_order: --seed) and the
# held-out streams (Seeds: +777 ... +779).
SEED_OFFSET = 50_000


@dataclasses.dataclass(frozen=True)
class OfflineShare:
  """The offline run's dataset, loaded: its frame store and where it came from."""
  replay_dir: str
  subset: str
  store: frame_store.FrameStore

  def batches(self, batch_size: int, seed: int, start_batch: int) -> tf.data.Dataset:
    """Batches of `batch_size` transitions (the contract dict of data/pipeline.py), batch i
    seeded (seed + SEED_OFFSET, i), from batch `start_batch` on."""
    return pipeline.transition_dataset(self.store, batch_size, seed=seed + SEED_OFFSET,
                                       start_batch=start_batch)


def _needs(what: str) -> str:
  return (f"--offline_fraction > 0 draws the offline share of each batch from the dataset the "
          f"offline run trained on{what}")


def open_share(offline_dir: str, summary: Dict[str, object], game: str, batch_size: int,
               num_deltas: int, log: Callable[[str], None] = print) -> OfflineShare:
  """The dataset of the offline run in `offline_dir` (its verified summary.json `summary`),
  loaded for batches of `batch_size` offline transitions (`num_deltas`: N of the learner, for
  the memory a train step holds). ValueError naming the file and key, or the directory: a
  summary that records no dataset, a dataset directory that is gone, one whose listing differs
  from what the checkpoints' fingerprint.json records (files added, removed or resized: another
  dataset in its place) or whose transitions are not the summary's |D|, a pooled run's
  (--pool_checkpoints: no one dataset in memory); the dataset record's
  refusals (another suite, game or frame format) as replay_files.DatasetError (a
  ValueError)."""
  path = os.path.join(offline_dir, "summary.json")
  replay_dir, subset = summary.get("dataset_dir"), summary.get("subset")
  if not (isinstance(replay_dir, str) and replay_dir and isinstance(subset, str) and subset):
    raise ValueError(
        _needs(f", but {path} records no dataset ('dataset_dir' {replay_dir!r}, 'subset' "
               f"{subset!r}; train_offline.py and compare.py write both): rerun the offline "
               f"run to write them, or fine-tune with --offline_fraction=0"))
  config = summary.get("config") if isinstance(summary.get("config"), dict) else {}
  pool = config.get("pool_checkpoints")
  if pool or "," in replay_dir:
    raise ValueError(
        f"--offline_fraction > 0 is not supported for a pooled offline run: {path} records a "
        f"checkpoint pool ('pool_checkpoints' {pool!r} over 'dataset_dir' {replay_dir}), and "
        f"the offline share is drawn from one dataset held whole in memory; fine-tune with "
        f"--offline_fraction=0")
  try:
    found = replay_files.path_isdir(replay_dir)
  except replay_files.UnreachableError as e:
    raise ValueError(_needs(f" ({path} 'dataset_dir'), {replay_dir}, which could not be "
                            f"reached ({e})")) from e
  if not found:
    raise ValueError(_needs(f" ({path} 'dataset_dir'), {replay_dir}, which does not exist "
                            f"(moved or deleted?): put it back there, or fine-tune with "
                            f"--offline_fraction=0"))
  env = factory.make_env(game)
  spec = env.env.observation_spec()
  action_set = getattr(env.env, "action_set", None)
  # The dataset record names the game without the suite ('Breakout' of suite 'minatar').
  suite, name = (("minatar", env.game.split("/", 1)[1]) if factory.is_minatar(game)
                 else (dataset_record.DEFAULT_SUITE, env.game))
  data = offline_dataset.DataSettings(
      dataset_dir=replay_dir, subset=subset, batch_size=int(batch_size),
      num_deltas=int(num_deltas), seeds=Seeds(0), default=None)
  opened = offline_dataset.open_dataset(
      data, env_factory=None, observation_shape=tuple(spec.shape),
      num_actions=int(env.env.action_spec().maximum) + 1, log=log, collect=False,
      game=name, action_set=action_set, suite=suite)
  _check_identity(offline_dir, opened.identity, replay_dir)
  recorded = summary.get("num_transitions")
  if recorded is not None and int(recorded) != opened.store.num_transitions:
    raise ValueError(_needs(f": {path} records 'num_transitions' = {recorded}, but "
                            f"{replay_dir} (subset {subset}) now holds "
                            f"{opened.store.num_transitions} transitions: not the offline "
                            f"run's dataset"))
  log(f"Offline share of each batch: {batch_size} transitions of {replay_dir} (subset "
      f"{subset}, {opened.store.num_transitions} transitions, the offline run's dataset).")
  return OfflineShare(replay_dir=replay_dir, subset=subset, store=opened.store)


def _check_identity(offline_dir: str, identity: Dict[str, object], replay_dir: str) -> None:
  """The dataset's identity now against the one the offline checkpoints' fingerprint.json
  records; a fingerprint without one (compare.py's records the dataset kind) leaves the check
  to |D| alone."""
  fp_path = os.path.join(offline_dir, "checkpoints", training.FINGERPRINT)
  if not paths.exists(fp_path):
    return
  recorded: Optional[Dict[str, object]] = training.read_fingerprint(fp_path).get("dataset")
  if not isinstance(recorded, dict):
    return
  differ = sorted(k for k in set(recorded) | set(identity) if recorded.get(k) != identity.get(k))
  if differ:
    raise ValueError(_needs(
        f", but {replay_dir} is not that dataset any more: the offline checkpoints' {fp_path} "
        f"records its 'dataset' as {recorded}, the directory now gives {identity} (differing: "
        f"{', '.join(differ)}; files added, removed or resized). Restore the offline run's "
        f"dataset, or fine-tune with --offline_fraction=0"))

