"""Every file a tracked file cites exists in this repository: a reader can follow every reference.

Cited are paths of source-like files (``.md``, ``.py``, ``.ipynb``, ``.yml``, ``.yaml``, ``.toml``);
a bare file name must be the name of a tracked file. The exceptions are named below: the authors'
scripts (``pulkitgopalani/tf-matcomp``, cited as theirs) and placeholder names in examples.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"(?<![\w/.:-])((?:\.\.?/)*[\w-]+(?:/[\w.-]+)*\.(?:md|py|ipynb|ya?ml|toml))\b")
THEIRS = {"train.py", "train_embed.py", "patch.py", "att_maps.py", "probe.py", "embed.py", "ood.py", "data.py",
          "model.py", "model_linear.py", "modeling_bert.py", "train_mws_att_scale.py", "model_linear_att_scale.py"}
THEIR_FOLDERS = ("src/", "configs/")  # the authors' repository's folders (this one has none of that name)
PLACEHOLDERS = {"X.ipynb", "out.ipynb", "chapter.ipynb", "nope.ipynb", "bad.py", "x.ipynb",
                "base.ipynb"}  # base.ipynb: the file jupyter-cache keeps an executed notebook in
SCANNED = ("README.md", "benchmarks", "book", "lib", "scripts", "tests", "_config.yml", "_toc.yml", ".ci",
           "pyproject.toml", "requirements.txt", "static/README.md")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", *SCANNED], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def resolves(path: str, where: Path) -> bool:
    """``path`` names a file inside the repository, from its root, the citing file's folder or ``lib/``."""
    for base in (ROOT, where, ROOT / "lib"):
        target = (base / path).resolve()
        if target.is_relative_to(ROOT) and target.exists():
            return True
    return False


def missing_citations(text: str, where: Path, names: set[str]) -> list[str]:
    """The cited paths in ``text`` (a file in folder ``where``) that name no file of the repository."""
    bad = []
    for path in CITED.findall(text):
        if path in THEIRS or path.startswith(THEIR_FOLDERS) or path.split("/")[-1] in PLACEHOLDERS:
            continue
        if not (("/" not in path and path in names) or resolves(path, where)):
            bad.append(path)
    return bad


def test_the_check_finds_a_citation_of_a_missing_file():
    names = {"README.md"}
    notes, outside = "EXPERIMENTS" + ".md", "../" + "shared/MEASUREMENTS" + ".md"  # split: this file cites neither
    assert missing_citations(f"see {notes} §2 and {outside}", ROOT, names) == [notes, outside]
    assert missing_citations("see README.md, benchmarks/presets.md and the authors' train.py", ROOT, names) == []


@pytest.mark.parametrize("name", tracked())
def test_every_cited_file_exists(name):
    path = ROOT / name
    if path.is_dir() or path.suffix in {".png", ".svg", ".woff", ".woff2", ".ttf", ".otf", ".ico"}:
        return
    names = {Path(n).name for n in tracked()}
    text = path.read_text(errors="ignore")
    assert missing_citations(text, path.parent, names) == []
