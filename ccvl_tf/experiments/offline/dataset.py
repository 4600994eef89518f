"""The dataset of an offline run: the replay directory (--dataset_dir, or the default dataset
collected once), loaded into a frame store with the memory of a train step reserved first (or,
with --pool_checkpoints, a checkpoint pool of one or more runs: data/replay_pool.py), its
seeded batch streams, and the identity the run's fingerprint records."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

from ccvl_tf.data import dataset_record, frame_store, pipeline, replay_pool
from ccvl_tf.data import replay_source
from ccvl_tf.experiments.offline import default_dataset, phase_times
from ccvl_tf.experiments.offline.phase_times import PhaseTimes
from ccvl_tf.experiments.offline.seeds import Seeds


# Memory a train step holds per transition beside the frame store: the batches in flight in
# the input pipeline and the step's float32 copies, activations and gradients, in stacked
# uint8 observations, plus the delta-conditioned head's share per sampled delta; and a fixed
# part (networks, traced steps, the evaluation environment). Peak RSS measured on CPU with
# the Nature torso: CCVL (N = 8) 29 observations per transition at batch 512-2048, BC 26;
# CCVL at N = 128, batch 256: 19 KB per delta and transition.
TRAIN_STEP_OBSERVATIONS = 30
TRAIN_STEP_BYTES_PER_DELTA = 20_000
TRAIN_STEP_FIXED_BYTES = 500_000_000


@dataclasses.dataclass(frozen=True)
class PoolSettings:
  """A checkpoint pool (--pool_checkpoints, --pool_swap_steps): `checkpoints` of the data in
  memory at a time, a new draw every `swap_steps` batches; the held-out and diagnostics
  batches come from `final_draw`, the draw of the run's last training batch."""
  checkpoints: int
  swap_steps: int
  final_draw: int


@dataclasses.dataclass(frozen=True)
class DataSettings:
  """What a run's dataset is made of (config.resolve makes it from the flags): the replay
  directory `dataset_dir` (None: the `default` dataset; several runs' separated by commas with
  a `pool`), its `subset`, batches of `batch_size` transitions with their seeds, N
  (`num_deltas`) for the train step's memory, and the checkpoint pool (None: the whole dataset
  in memory)."""
  dataset_dir: Optional[str]
  subset: str
  batch_size: int
  num_deltas: int
  seeds: Seeds
  default: default_dataset.DefaultDataset
  pool: Optional[PoolSettings] = None


def dataset_dirs(dataset_dir: Optional[str]) -> List[str]:
  """The run directories of --dataset_dir (several separated by commas; none when unset)."""
  return [d.strip() for d in (dataset_dir or "").split(",") if d.strip()]


def training_reserve(data: DataSettings, observation_shape):
  """The frame store's `Reserve` of a run: the memory of training on --batch_size batches of
  `observation_shape` states, and at least --batch_size transitions in the dataset."""
  per = (int(np.prod(observation_shape)) * TRAIN_STEP_OBSERVATIONS
         + data.num_deltas * TRAIN_STEP_BYTES_PER_DELTA)
  return frame_store.Reserve(
      nbytes=data.batch_size * per + TRAIN_STEP_FIXED_BYTES,
      what=f"--batch_size={data.batch_size} (about {per / 1e6:.2f} MB per transition in a "
           f"train step, --num_deltas={data.num_deltas})",
      min_transitions=data.batch_size)


# Batches that pick Fixed-CCVL's delta (1,024 transitions at batch 32).
HELD_OUT_BATCHES = 32
# States per batch when the exact count Gram reads the dataset (~28 MB of Atari stacks).
STATE_BATCH = 1000


@dataclasses.dataclass(frozen=True)
class Batches:
  """The run's batches of --batch_size transitions from `store`, each stream with its seed;
  with a checkpoint `pool` (`store` None) the training batches come from its draws, the
  others from its draw `final_draw` (that of the last training batch)."""
  store: Optional[frame_store.FrameStore]
  batch_size: int
  seeds: Seeds
  pool: Optional[replay_pool.CheckpointPool] = None
  final_draw: int = 0

  @property
  def num_transitions(self) -> int:
    """|D|: the dataset's transitions (a pool's: of all its checkpoints)."""
    return (self.pool if self.pool is not None else self.store).num_transitions

  def _store(self) -> frame_store.FrameStore:
    """The store of the batches other than the training ones."""
    return self.store if self.pool is None else self.pool.store_of_draw(self.final_draw)

  def training(self, start: int):
    """The training batches from batch `start` on (the learner's and the reference agents')."""
    if self.pool is not None:  # a draw's damaged file raised as the pool's one line
      return pipeline.PoolBatches(self.pool, self.batch_size, seed=self.seeds.data_order(),
                                  start_batch=start)
    return pipeline.transition_dataset(self.store, self.batch_size,
                                       seed=self.seeds.data_order(), start_batch=start)

  def held_out(self):
    """The HELD_OUT_BATCHES batches that pick Fixed-CCVL's delta and the belief's temperature
    (a pipeline seed the training never used; with the small default dataset these transitions
    were seen in training too)."""
    return pipeline.transition_dataset(self._store(), self.batch_size,
                                       seed=self.seeds.held_out()).take(HELD_OUT_BATCHES)

  def state_batches(self, num_states: int = 0) -> Callable[[], Iterator[np.ndarray]]:
    """() -> the dataset's states s as observation batches of up to STATE_BATCH, each state
    once: every transition's (num_states 0) or a fixed uniform subsample of num_states of them
    without replacement (seeded by Seeds.count_states), in dataset order. For CCVL's exact
    count Gram (CCVLConfig.count_gram='exact', count_gram_states). ValueError with a checkpoint
    pool, which never holds every state."""
    if self.pool is not None:
      raise ValueError("count_gram='exact' sums Phi^T Phi over the dataset's states, and a "
                       "checkpoint pool (--pool_checkpoints) holds only some checkpoints at a "
                       "time: use count_gram='running' (the default), or hold the whole "
                       "dataset (--pool_checkpoints=0)")
    total = self.store.num_transitions
    if num_states and num_states < total:
      rng = np.random.default_rng(self.seeds.count_states())
      positions = np.sort(rng.choice(total, size=int(num_states), replace=False))
    else:
      positions = np.arange(total)
    store = self.store

    def batches():
      for i in range(0, len(positions), STATE_BATCH):
        yield store.observations(positions[i:i + STATE_BATCH])
    return batches

  def diagnostics_held_out(self):
    """The 8 batches of the confidence diagnostics."""
    return pipeline.transition_dataset(self._store(), self.batch_size,
                                       seed=self.seeds.diagnostics_held_out()).take(8)


@dataclasses.dataclass(frozen=True)
class Dataset:
  """The replay directory a run trains on (several runs' separated by commas: a pool), its
  frame store (None with a checkpoint pool: `batches.pool`), its batches and its identity
  (`dataset_identity`: what the run's fingerprint records)."""
  replay_dir: str
  store: Optional[frame_store.FrameStore]
  batches: Batches
  identity: Dict[str, object]


def open_dataset(data: DataSettings, env_factory: Callable, observation_shape,
                 num_actions: int, log: Callable[[str], None], collect: bool = True,
                 timer: Optional[PhaseTimes] = None, game: Optional[str] = None,
                 action_set: Optional[Sequence[int]] = None,
                 suite: str = dataset_record.DEFAULT_SUITE) -> Dataset:
  """The run's Dataset: memory for the batches checked before any data is read or collected;
  the dataset's own record (its game, action set and frame format) checked against `game`
  of `suite` ('atari'; online fine-tuning's offline share also 'minatar'), `action_set` (the
  environment's action ids) and `observation_shape` before any data is
  read (data/dataset_record.py; what a directory without a record leaves unchecked is logged);
  the default dataset collected first (environments from `env_factory`) when there is no
  --dataset_dir and `collect`; then the frame store of --subset, and the directory's
  identity."""
  reserve = training_reserve(data, observation_shape)
  reserve.check(None)  # memory for the batches alone: before any data is read or collected
  if data.pool is not None:
    return _open_pool(data, env_factory, observation_shape, num_actions, log, reserve, collect,
                      timer, game, action_set)
  if data.dataset_dir:
    replay_dir = data.dataset_dir
  elif collect:
    with phase_times.phase(timer, "collection of the default dataset"):
      replay_dir = default_dataset.ensure_default_dataset(data.default, env_factory, log)
  else:
    replay_dir = data.default.out_dir
  # Resolved (path or path/replay_logs, local or remote) and listed once, here: the record's
  # check, the frame store (its cache check and reader) and the identity take this one source.
  source = replay_source.replay_source(replay_dir)
  _check_record(source, game, action_set, observation_shape, log, suite)
  log(f"Loading {replay_dir} (subset {data.subset}) ...")
  # Progress: the files verified on first use, each checkpoint loaded; remote datasets also
  # what is streamed and whether the local frame-store cache is used.
  with phase_times.phase(timer, "frame store"):
    store = frame_store.FrameStore.from_replay(source, data.subset, num_actions=num_actions,
                                               progress=log, reserve=reserve)
  log(f"Frame store: {store.num_transitions} transitions, {store.num_frames} frames, "
      f"{store.nbytes / 2**20:.1f} MiB ({store.bytes_per_transition:.0f} bytes/transition).")
  return Dataset(replay_dir=replay_dir, store=store,
                 batches=Batches(store, data.batch_size, data.seeds),
                 identity=dataset_identity(source))


def _open_pool(data: DataSettings, env_factory, observation_shape, num_actions: int, log,
               reserve: frame_store.Reserve, collect: bool, timer: Optional[PhaseTimes],
               game: Optional[str], action_set) -> Dataset:
  """open_dataset with a checkpoint pool (data.pool): each run's record checked, the pool's
  checkpoints surveyed (their small arrays read: |D| and the memory of the largest draw,
  checked with `reserve`); the frames are read draw by draw as training reaches them."""
  runs = dataset_dirs(data.dataset_dir)
  if not runs:
    if collect:
      with phase_times.phase(timer, "collection of the default dataset"):
        runs = [default_dataset.ensure_default_dataset(data.default, env_factory, log)]
    else:
      runs = [data.default.out_dir]
  sources = [replay_source.replay_source(d) for d in runs]
  for source in sources:
    _check_record(source, game, action_set, observation_shape, log)
  log(f"Surveying {', '.join(runs)} (subset {data.subset}) for a pool of "
      f"{data.pool.checkpoints} checkpoint(s), a new draw every {data.pool.swap_steps:,} "
      f"steps ...")
  with phase_times.phase(timer, "frame store"):
    pool = replay_pool.CheckpointPool(sources, data.subset, data.pool.checkpoints,
                                      data.pool.swap_steps, data.seeds.pool_draws(),
                                      num_actions=num_actions, progress=log, reserve=reserve)
  log(f"Checkpoint pool: {pool.num_transitions:,} transitions in {pool.num_checkpoints} "
      f"checkpoint(s), {data.pool.checkpoints} in memory at a time (at most "
      f"{pool.max_pool_bytes / 2**20:.1f} MiB), every checkpoint drawn in every "
      f"{pool.draws_per_epoch} draws.")
  identity = (dataset_identity(sources[0]) if len(sources) == 1 else
              {"runs": [dataset_identity(s) for s in sources]})
  return Dataset(replay_dir=",".join(runs), store=None,
                 batches=Batches(None, data.batch_size, data.seeds, pool=pool,
                                 final_draw=data.pool.final_draw),
                 identity=identity)


def _check_record(source: replay_source.ReplaySource, game: Optional[str], action_set,
                  observation_shape, log: Callable[[str], None],
                  suite: str = dataset_record.DEFAULT_SUITE) -> None:
  """dataset_record.check of the run's game (nothing without `game`), its notes logged."""
  if game is None:
    return
  for note in dataset_record.check(source, game=game, action_set=action_set,
                                   observation_shape=observation_shape, suite=suite):
    log(f"Note: {note}.")


def dataset_identity(source: replay_source.ReplaySource) -> Dict[str, object]:
  """Path, and a hash of the replay directory's listing (file names and sizes) and of its
  small metadata files, so that another dataset in the same place is noticed without reading
  the data itself: of the directory as the run names it (`source`, open_dataset's
  `replay_source.ReplaySource`: its `path` and listing of it are used as they are; a path is
  a TypeError)."""
  replay_source.require_source(source, "offline.dataset.dataset_identity")
  path = source.path
  names = sorted(source.path_names or ())
  return {"path": path if source.remote else os.path.abspath(path), "files": len(names),
          "listing_sha256": replay_source.listing_sha256(path, names, source.remote)}
