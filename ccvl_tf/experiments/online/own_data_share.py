"""The offline share of fine-tuning batches (--offline_fraction F) for a run of ccvl_tf.fit on
own data: round(F x batch) transitions of each learner batch drawn from the very transitions the
run trained on, the rest from the online replay (runner.py concatenates them, online rows
first; Atari's and MinAtar's share: offline_share.py).

The data is read again from where the run's summary.json says it was read ('data': an .npz
file, 'minari:<dir>' or 'tfds:<dir>', read by experiments/fit.load_data as fit reads it) and
must be those transitions exactly: its fingerprint (Transitions.fingerprint, a hash of every
array) is the one the run's checkpoints were trained on (their fingerprint.json 'data'), so a
file edited, replaced or moved in its place is refused. Data the run held in memory only
('arrays': numpy arrays given to Transitions.from_arrays; 'rlds': a tf.data.Dataset) cannot be
read again: fine-tuning such a run with F > 0 is refused in one line (save the data with
Transitions.save_npz and fit on the file). Batch i is Transitions.batches' batch i at seed
--seed + SEED_OFFSET, a function of (seed, i) alone, i = learner steps since the offline
start: a resumed run continues the stream where its checkpoint left it.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Dict, Iterator

import numpy as np

from ccvl_tf.data import transitions as transitions_lib
from ccvl_tf.experiments import fit
from ccvl_tf.experiments.online import offline_share
from ccvl_tf.runtime import paths
from ccvl_tf.runtime import training

# The stream's seed offset: the Atari and MinAtar share's (--seed + SEED_OFFSET), apart from
# the run's training order (--seed) and its held-out batches (--seed + 777).
SEED_OFFSET = offline_share.SEED_OFFSET
# The prefixes of the data sources fit reads again by name (experiments/fit.load_data).
_NAMED_PREFIXES = ("minari:", "tfds:")


@dataclasses.dataclass(frozen=True)
class OwnDataShare:
  """The run's data, read again and checked: `batches` of it."""
  source: str
  data: transitions_lib.Transitions

  def batches(self, batch_size: int, seed: int,
              start_batch: int) -> Iterator[Dict[str, np.ndarray]]:
    """Batches of `batch_size` transitions (the transition-batch dict), batch i that of
    Transitions.batches at seed `seed` + SEED_OFFSET, from batch `start_batch` on."""
    return self.data.batches(batch_size, seed + SEED_OFFSET, start_batch)


def _needs(what: str) -> str:
  return (f"--offline_fraction > 0 draws the offline share of each batch from the transitions "
          f"the offline run trained on{what}")


def is_readable_again(source: str) -> bool:
  """Whether fit can read the data of `source` (summary.json 'data') again by its name: an
  .npz file, a Minari or a TFDS directory; not data held in memory ('arrays', 'rlds')."""
  return source.endswith(".npz") or source.startswith(_NAMED_PREFIXES)


def open_share(offline_dir: str, summary: Dict[str, object], batch_size: int,
               log: Callable[[str], None] = print) -> OwnDataShare:
  """The data of the run on own data in `offline_dir` (its verified summary.json `summary`),
  read again for batches of `batch_size` offline transitions. ValueError naming the file and
  the key, or the data: data held in memory only, data that cannot be read now (moved,
  deleted), data that is not what the checkpoints trained on (fingerprint.json 'data')."""
  path = os.path.join(offline_dir, "summary.json")
  source = str(summary["data"])
  if not is_readable_again(source):
    raise ValueError(_needs(
        f", but {path} records 'data' = {source!r}: data the ccvl_tf.fit call held in memory, "
        f"which cannot be read again; save it with Transitions.save_npz and fit on that file, "
        f"or fine-tune with --offline_fraction=0"))
  try:
    data = fit.load_data(source)
  except (OSError, ValueError) as e:
    raise ValueError(_needs(f" ({path} 'data'), {source}, which cannot be read now ({e}); a "
                            f"relative path is read from the current directory: put it back, "
                            f"or fine-tune with --offline_fraction=0")) from None
  fp_path = os.path.join(offline_dir, "checkpoints", training.FINGERPRINT)
  recorded = (training.read_fingerprint(fp_path).get("data") if paths.exists(fp_path)
              else None)
  if recorded is None:
    raise ValueError(_needs(f", but {fp_path} is missing or records no 'data' (the hash of "
                            f"the transitions the checkpoints trained on): the data of "
                            f"{source} cannot be checked; fine-tune with --offline_fraction=0"))
  if data.fingerprint() != recorded:
    raise ValueError(_needs(f", but {source} ({path} 'data') is not those transitions any "
                            f"more: its fingerprint {data.fingerprint()[:12]}... is not the "
                            f"{recorded[:12]}... the checkpoints' {fp_path} records (edited or "
                            f"replaced); restore the run's data, or fine-tune with "
                            f"--offline_fraction=0"))
  log(f"Offline share of each batch: {batch_size} transitions of {source} "
      f"({data.num_transitions:,} transitions, the offline run's data).")
  return OwnDataShare(source=source, data=data)
