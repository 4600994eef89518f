"""The reported seeds' table from their headroom evaluations (docs/five_seeds.md).

  python tools/five_seeds_report.py --seeds_dir=runs/demo_seeds [--seeds=0,1,2,3,4]
      [--output=docs/results/five_seeds_runs.json]

Reads SEEDS_DIR/seed_<k>/headroom/headroom.json of every seed (binaries/headroom.py's output on
each demo_seeds.py run), refuses seeds evaluated on other episodes, writes the per-episode
scores the page is recomputed from (OUTPUT) and prints the page section and README's table
(ccvl_tf.experiments.offline.seeds_headroom).
"""
import json
import os
import sys

from absl import app
from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401
from ccvl_tf.experiments.offline import seeds_headroom
from ccvl_tf.runtime import strict_json

_DIR = flags.DEFINE_string("seeds_dir", None, "demo_seeds.py's --output_dir.", required=True)
_OUT = flags.DEFINE_string("output", None, "Where to write the compact per-seed records.")
_SEEDS = flags.DEFINE_list("seeds", None, "Which seeds (default: every seed_<k> with a "
                           "headroom.json).")


def main(argv):
  del argv
  logging.set_verbosity(logging.ERROR)  # rliable's per-estimate INFO lines
  seeds = ([int(k) for k in _SEEDS.value] if _SEEDS.value else
           sorted(int(n.split("_")[1]) for n in os.listdir(_DIR.value) if n.startswith("seed_")
                  and os.path.exists(os.path.join(_DIR.value, n, "headroom", "headroom.json"))))
  results = {}
  for k in seeds:
    path = os.path.join(_DIR.value, f"seed_{k}", "headroom", "headroom.json")
    if not os.path.exists(path):
      sys.exit(f"five_seeds_report.py: error: {path} is missing: run binaries/headroom.py on "
               f"seed {k}'s run first")
    with open(path) as f:
      results[str(k)] = json.load(f)
  other = seeds_headroom.check_same_episodes(results)
  if other:
    sys.exit(f"five_seeds_report.py: error: seeds {other} were evaluated on other episodes "
             f"than seed {seeds[0]}'s")
  if _OUT.value:
    with open(_OUT.value, "w") as f:
      strict_json.dump({k: seeds_headroom.compact(r) for k, r in results.items()}, f,
                       indent=1)
  print(seeds_headroom.report(results))
  print(seeds_headroom.summary_table(results))


if __name__ == "__main__":
  app.run(main)
