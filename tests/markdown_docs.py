"""The repository's markdown, read for the doc tests (a helper, not a test module).

`doc_files` lists README.md, BUILD.md and docs/**/*.md; `links` gives a file's link and image
targets outside code; `anchors` the ids GitHub gives its headings; `shell_commands` the
commands of its fenced bash blocks (continuation lines joined) and of its inline code spans.
Nothing is imported or run.
"""
import collections
import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.S)


def doc_files():
  """Every markdown file a reader is sent to: README.md, BUILD.md and docs/**/*.md."""
  files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "BUILD.md")]
  files += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
  return files


def _split_fences(text):
  """(prose lines, [(info string, code lines)]): the text outside and inside fenced blocks."""
  prose, blocks, block, info = [], [], None, ""
  for line in text.split("\n"):
    m = _FENCE.match(line.strip())
    if m and block is None:
      block, info = [], line.strip()[len(m.group(1)):].strip()
      prose.append("")
    elif m and block is not None:
      blocks.append((info, block))
      block = None
      prose.append("")
    elif block is not None:
      block.append(line)
      prose.append("")
    else:
      prose.append(line)
  return prose, blocks


def _prose(path):
  return "\n".join(_split_fences(open(path, encoding="utf-8").read())[0])


def links(path):
  """The link and image targets of the markdown file at `path`, outside code."""
  text = _INLINE_CODE.sub(" ", _prose(path))
  return [m.group(1) for m in _LINK.finditer(text)]


def slug(heading):
  """GitHub's id for a heading: lower case, punctuation dropped, spaces -> hyphens."""
  text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link counts by its text
  return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path):
  """The heading ids of the markdown file at `path` (a repeated heading gets -1, -2, ...)."""
  seen, out = collections.Counter(), set()
  for line in _prose(path).split("\n"):
    m = _HEADING.match(line)
    if not m:
      continue
    base = slug(m.group(2))
    out.add(base if not seen[base] else f"{base}-{seen[base]}")
    seen[base] += 1
  return out


def shell_commands(path):
  """The commands of the file's fenced bash / sh blocks, continuation lines joined and
  comments dropped, then the inline code spans that run a binary."""
  prose, blocks = _split_fences(open(path, encoding="utf-8").read())
  out = []
  for info, lines in blocks:
    if info not in ("bash", "sh", "shell", "console"):
      continue
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    for line in joined.split("\n"):
      line = " ".join(re.sub(r"(^|\s)#.*$", "", line).split())
      if line:
        out.append(line)
  for m in _INLINE_CODE.finditer("\n".join(prose)):
    span = " ".join(m.group(2).split())
    if re.search(r"binaries/\w+\.py", span):
      out.append(span)
  return out


def binary_flags(command):
  """'python binaries/x.py --a=1 --b 2' -> ('x', ['a', 'b']); (None, []) when the command runs
  no binary of binaries/."""
  m = re.search(r"binaries/(\w+)\.py((?:\s+\S+)*)", command)
  if not m:
    return None, []
  flags = [t[2:].split("=", 1)[0] for t in m.group(2).split() if t.startswith("--")]
  return m.group(1), [f for f in flags if f]


def make_targets(command):
  """'make demo' -> ['demo']; 'make PYTHON=... test' -> ['test']; [] for other commands."""
  words = command.split()
  if not words or words[0] != "make":
    return []
  return [w for w in words[1:] if "=" not in w and not w.startswith("-")]


def table_after(path, marker, after=None):
  """The first markdown table after the first line of the file at `path` that contains
  `marker` (with `after`: the first such line after the first line containing `after`): a list
  of rows, each a list of its stripped cells, the header first and the separator row (| --- |)
  left out. Raises ValueError when there is no such table."""
  lines = open(path, encoding="utf-8").read().split("\n")
  first = 0 if after is None else next(
      (i for i, line in enumerate(lines) if after in line), len(lines))
  start = next((i for i, line in enumerate(lines) if i >= first and marker in line), None)
  if start is None:
    raise ValueError(f"{path}: no line contains {marker!r}")
  rows, in_table = [], False
  for line in lines[start + 1:]:
    if line.lstrip().startswith("|"):
      in_table = True
      cells = [c.strip() for c in line.strip().strip("|").split("|")]
      if not all(re.fullmatch(r":?-+:?", c) for c in cells):
        rows.append(cells)
    elif in_table:
      break
  if not rows:
    raise ValueError(f"{path}: no table after {marker!r}")
  return rows
