"""The actor process of online fine-tuning, as a command line:

  python -m ccvl_tf.experiments.online actor CONFIG_JSON ID ADDRESS PARENT_PID

The learner starts one per local actor (actor.py, `ActorProcesses.start`); on another machine
it is started by hand with PARENT_PID 0 (docs/online.md, "Multi-machine layout"). The process
runs `actor.actor_main`: the learner's exploration policy in its own environment, writing to
the Reverb server at ADDRESS.
"""
import sys

from absl import logging

from ccvl_tf.experiments.online import actor as online_actor
# The learner's module, so that the actor process imports what it always has (TensorFlow and
# every online module) before it starts.
from ccvl_tf.experiments.online import runner  # noqa: F401  pylint: disable=unused-import


def _main(argv):
  if len(argv) >= 2 and argv[1] == "actor":
    config_path, actor_id, address, parent = argv[2], int(argv[3]), argv[4], int(argv[5])
    logging.set_verbosity(logging.ERROR)
    return online_actor.actor_main(config_path, actor_id, address, parent)
  print("usage: python -m ccvl_tf.experiments.online actor CONFIG_JSON ID ADDRESS PARENT_PID "
        "(started by binaries/finetune_online.py)", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(_main(sys.argv))
