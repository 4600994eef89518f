"""tests/forked_binary.py: a forked run of a binary is what a fresh start of it gives (exit
code, stdout, stderr), a run past its timeout is killed and the server goes on serving, and a
binary whose main block is not `config_flags.run(main)` is refused."""
import subprocess

import pytest

from tests import forked_binary

TESTDATA = "testdata/dqn_replay/Breakout/1/replay_logs"


@pytest.mark.slow
def test_a_forked_run_gives_what_a_fresh_start_gives(tmp_path):
  """A flag refusal (absl's parse error), a refusal from the config's validation and a help
  text, each run forked and as a fresh process: the same exit code and the same output."""
  for args in (["--alpha=nan"], [f"--root_dir={tmp_path / 'r'}", "--num_pairs=0"],
               ["--helpshort"]):
    forked = forked_binary.run("train_offline.py", args, cwd=tmp_path)
    fresh = forked_binary.run("train_offline.py", args, cwd=tmp_path, fresh=True)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode, fresh.stdout, fresh.stderr), args
  assert "--alpha" in forked.stdout and "Offline training of CCVL" in forked.stdout  # the help
  assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_run_past_its_timeout_is_killed_and_the_server_serves_the_next(tmp_path):
  root = tmp_path / "r"
  with pytest.raises(subprocess.TimeoutExpired):
    forked_binary.run("train_offline.py", [f"--dataset_dir={TESTDATA}", f"--root_dir={root}",
                                           "--num_steps=100000", "--reference_agents=none"],
                      cwd=forked_binary.ROOT, timeout=2)
  r = forked_binary.run("train_offline.py", ["--alpha=-1", f"--root_dir={root}"], cwd=tmp_path)
  assert r.returncode == 1
  assert r.stderr == ("train_offline.py: error: --alpha must be a finite number >= 0, got -1.0 "
                      "(--helpshort lists the flags)\n")


def test_a_binary_with_another_main_block_is_refused(tmp_path):
  script = tmp_path / "other.py"
  script.write_text('def main(argv):\n  pass\n\n\nif __name__ == "__main__":\n  main([])\n')
  with pytest.raises(AssertionError, match="does not end with"):
    forked_binary._Server(str(script), forked_binary.binary_env())  # pylint: disable=protected-access
