"""Runs the layout rule of docs/gridworld_layout.md over its ordered candidates and writes one
row per candidate (docs/gridworld_layout_search.csv by default).

  python tools/gridworld_layout_search.py [--out=docs/gridworld_layout_search.csv]
"""
import argparse
import time

from ccvl_tf.experiments.gridworld import layout_search


def main():
  p = argparse.ArgumentParser(description=__doc__)
  p.add_argument("--out", default="docs/gridworld_layout_search.csv")
  args = p.parse_args()
  t0 = time.time()
  rows = layout_search.search(args.out, log=lambda *a: print(*a, flush=True))
  passing = [r for r in rows if r[-1] is True]
  print(f"{len(rows)} candidates, {len(passing)} pass; first: "
        f"{passing[0][:2] if passing else None}; {time.time() - t0:.0f} s")


if __name__ == "__main__":
  main()
