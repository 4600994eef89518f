"""A standalone Reverb server for online fine-tuning (actors and learner connect to it).

  python binaries/reverb_server.py --game=gridworld|Breakout [--agent=ccvl|cql] --port=8000 \
      [--offline_dir=DIR] [--checkpoint_dir=DIR] [--samples_per_insert=8 ...]

Holds the 'replay' and 'variables' tables of ccvl_tf.data.reverb_replay with the signatures of
--game (the table flags must match the learner's: a learner refuses a server with others).
--offline_dir: the fine-tune's offline run, whose summary.json's CCVL settings (the delta head)
make the learner's network and so the 'variables' table's signature, as in the learner
(experiments/online/start.py `resolve_config`); without it, the defaults. With
--checkpoint_dir it restores the latest complete Reverb checkpoint at start, and the learner's
checkpoints (client.checkpoint()) are written there. Prints "Reverb server at localhost:PORT" once
serving, then a one-line security note (the port is open on every interface, without
authentication); stops on SIGTERM/SIGINT.
"""
import signal
import sys
import threading

from absl import flags
from absl import logging

import ccvl_tf  # noqa: F401
from ccvl_tf.runtime import quiet  # noqa: E402
quiet.quiet_start()  # before TensorFlow loads: only the project's own lines (BUILD.md)
from ccvl_tf.runtime import config_flags
from ccvl_tf.data import reverb_replay
from ccvl_tf.experiments.online import config as online_config
from ccvl_tf.experiments.online import start as online_start

# What the tables' signatures and rate limiter depend on (the learner samples the online share
# of its batch, --batch_size less round(--offline_fraction x --batch_size), from the table).
_TABLE_FLAGS = ("game", "agent", "samples_per_insert", "min_replay_size", "replay_capacity",
                "batch_size", "offline_fraction", "offline_dir")
config_flags.define(online_config.OnlineConfig, _TABLE_FLAGS)
config_flags.define(online_config.ServerConfig)  # --checkpoint_dir, an output: checked local
_PORT = flags.DEFINE_integer("port", 0, "Port to serve on (0: a free one, printed).")


def main(argv):
  del argv
  if not flags.FLAGS["verbosity"].present:
    logging.set_verbosity(logging.ERROR)
  cfg = config_flags.from_flags(online_config.OnlineConfig, _TABLE_FLAGS)
  server_cfg = config_flags.from_flags(online_config.ServerConfig)
  try:
    online_config.check_game(cfg.game)
    if cfg.offline_dir:  # the offline run's network settings, as the learner takes them
      cfg, _ = online_start.resolve_config(cfg, log=lambda s: print(s, flush=True))
    tables = online_config.make_server_tables(cfg)
    server, address = reverb_replay.start_server(tables, _PORT.value,
                                                   server_cfg.checkpoint_dir)
  except (ValueError, RuntimeError) as e:
    sys.exit(f"reverb_server.py: error: {e}")
  print(f"Reverb server at {address}", flush=True)
  print(reverb_replay.security_note(server.port), flush=True)
  done = threading.Event()
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: done.set())
  while not done.wait(1.0):
    pass
  server.stop()


if __name__ == "__main__":
  config_flags.run(main)
