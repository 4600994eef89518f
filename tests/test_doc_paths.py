"""Every `docs/...` path that README.md, BUILD.md or a page under docs/ names exists, so a step
that tells a reader to read or copy a file names a real one. A path with a placeholder
(`docs/alpha_sweep_rows_<kind>.csv`, `docs/figures/*.png`) must match at least one file.
Exceptions are listed below with their reason: OUTPUTS (files a documented step writes, not
committed) and KEPT_AS_WRITTEN (text that must stay as it was committed, e.g. a protocol
registered before its runs, whose later note names the files)."""
import glob
import os
import re

import markdown_docs as md

PATH = re.compile(r"(?<![\w/.-])(docs/[\w./%<>*{}-]+)")
PLACEHOLDER = re.compile(r"<[^>]*>|\{[^}]*\}")

# docs/... paths a documented step writes (none today).
OUTPUTS = set()
# (page, path, the words around it): named by text kept as it was committed.
KEPT_AS_WRITTEN = {
    # The alpha sweep's protocol (committed before the runs, unchanged since); its note names
    # the files as committed.
    ("docs/alpha_sweep.md", "docs/alpha_sweep_rows.csv",
     "(committed as `docs/alpha_sweep_rows.csv`)"),
}


def _named_paths(path):
  """(line number, docs/... path, line) of every path the file names, prose and code alike."""
  out = []
  with open(path, encoding="utf-8") as f:
    for number, line in enumerate(f, 1):
      out += [(number, m.group(1).rstrip(".,;:)"), line) for m in PATH.finditer(line)]
  return out


def _exists(path):
  if "*" in path or PLACEHOLDER.search(path):
    return bool(glob.glob(os.path.join(md.ROOT, PLACEHOLDER.sub("*", path))))
  return os.path.exists(os.path.join(md.ROOT, path))


def test_every_docs_path_named_exists():
  missing, kept = [], set()
  for page in md.doc_files():
    rel = os.path.relpath(page, md.ROOT)
    for number, path, line in _named_paths(page):
      if _exists(path) or path in OUTPUTS:
        continue
      exception = [k for k in KEPT_AS_WRITTEN if k[:2] == (rel, path) and k[2] in line]
      if exception:
        kept.update(exception)
        continue
      missing.append(f"{rel}:{number}: {path}")
  assert not missing, "docs/ paths that do not exist:\n" + "\n".join(missing)
  assert kept == KEPT_AS_WRITTEN  # an exception no page needs any more is removed


def test_the_path_reader_sees_placeholders_and_strips_punctuation(tmp_path, monkeypatch):
  monkeypatch.setattr(md, "ROOT", str(tmp_path))
  (tmp_path / "docs").mkdir()
  (tmp_path / "docs" / "rows_5pct.csv").write_text("")
  page = tmp_path / "README.md"
  page.write_text("Copy to `docs/rows_<kind>.csv`, then see docs/rows_5pct.csv.\n"
                  "(docs/gone.csv) and tools/docs/x.py\n")
  named = [(number, path) for number, path, _ in _named_paths(str(page))]
  assert named == [(1, "docs/rows_<kind>.csv"), (1, "docs/rows_5pct.csv"), (2, "docs/gone.csv")]
  assert [_exists(p) for _, p in named] == [True, True, False]
