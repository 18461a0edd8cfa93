"""Every number the book's prose types is a citation, the paper's, or a setting the code holds: a number
about our own runs comes from code (an ``{eval}`` role, ``matcomp.book.markup``, or a computed findings cell), so
that the text cannot drift from the runs it describes.

A number in a chapter's markdown cell (or in a page of ``book/*.md``, the prose the chapters include)
passes if it is

- inside a role, inline code or a link target (``{eval}`key```, ``{numref}`...```, `` `x = 3` ``);
- a citation: "§3.2.1", "Fig. 4", "Figs. 11–12", "App. J.2", "Table 1", "eq. (2)", a year after a venue;
- a value of ``matcomp.paper`` (at the precision the text gives it);
- a setting the code holds: a field of a preset (``matcomp.presets``) or of the chapters' sizes
  (``matcomp.sizes``), a module constant or a function default of the library (``matcomp.analysis``,
  ``matcomp.drop``, ...), a literal of the chapter's own parameters cell; so a sentence that states a
  setting fails the day the code changes it;
- or one of the few facts in ``ALLOWED`` below.

``python -m pytest tests/test_prose.py -n 0 -q`` prints every offender as (chapter, number, context).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
from functools import cache
from pathlib import Path

import nbformat
import pytest

import matcomp
import matcomp.paper
from matcomp.models.factory import build_model, count_parameters
from matcomp.presets import PRESETS
from matcomp.sizes import CHAPTER_SIZES
from matcomp.tokenizer import BERT_TOKENS, GPT_TOKENS

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "book").glob("*.ipynb"))
PAGES = [*CHAPTERS, *sorted((ROOT / "book").glob("*.md"))]  # the prose the chapters include

# Facts, not results, that no setting holds (at most 10, each with why it may be typed), keyed by page and
# the number as typed, e.g. ("intro", "2"): "the cores of the machine the shipped runs were trained on".
# None is needed today: every number in the prose is a citation, the paper's, a setting, or glued.
ALLOWED: dict[tuple[str, str], str] = {}

NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])(\s*%)?")
SPANS = [
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # roles: {eval}`key`, {numref}`fig`, {doc}`page`
    re.compile(r"``[^`]*``|`[^`\n]*`"),  # inline code
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"^```.*?^```", re.S | re.M),  # fenced blocks (directives' options, code)
    re.compile(r"\^\{?-?\w+\}?|_\{?\w+\}?"),  # TeX exponents and subscripts: X^2, L_{mask}, x_{11}
]
CITATION = re.compile(
    r"(?:§|\b(?:Figs?|Figures?|Tables?|Apps?|Appendix|Appendices|Sections?|Eqs?|equations?|Algorithm)\.?\s*)"
    r"[A-Z]?\(?\d+(?:\.\d+)*\)?(?:\s*(?:,|–|-|and|&)\s*§?[A-Z]?\(?\d+(?:\.\d+)*\)?)*")
YEAR = re.compile(r"\b(?:NeurIPS|ICML|ICLR|COLT|arXiv|TMLR|AISTATS),?\s+(?:19|20)\d\d\b|\((?:19|20)\d\d\)")
TEX_POWER = re.compile(r"10\^\{(-?\d+)\}")  # 10^{-3} is the number 1e-3
TIMES = re.compile(r"(?<=\d)x(?=\d)")  # 5x5 is 5×5


def numbers_in(value, depth: int = 0):
    """Every number in ``value``: itself, or inside a container, a dataclass or a string."""
    if depth > 6 or isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            yield abs(float(value))
    elif isinstance(value, str):
        for match in NUMBER.finditer(TIMES.sub("×", value)):
            yield abs(parse(match.group(0).rstrip("% ")))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers_in(key, depth + 1)
            yield from numbers_in(item, depth + 1)
    elif isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            yield from numbers_in(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from numbers_in(getattr(value, field.name), depth + 1)


def parse(text: str) -> float:
    return float(text.replace(",", ""))


@cache
def paper_values() -> frozenset[float]:
    return frozenset(v for name, value in vars(matcomp.paper).items() if name.isupper()
                     for v in numbers_in(value))


def library_modules():
    for info in pkgutil.walk_packages(matcomp.__path__, "matcomp."):
        if info.name.endswith(("__main__", ".cli", ".parallel")):
            continue
        yield importlib.import_module(info.name)


@cache
def setting_values() -> frozenset[float]:
    """The settings the code holds: presets (with their derived sizes), chapter sizes, the library's module
    constants and the defaults of its public functions and classes."""
    values = set()
    for cfg in PRESETS.values():
        values.update(numbers_in(cfg))
        values.update({cfg.data.seq_len, cfg.train.steps / 1000})
        if cfg.model.hidden <= 256:  # the model's size in millions of parameters (the paper's are in matcomp.paper)
            values.add(count_parameters(build_model(cfg.model, seed=0)) / 1e6)
    for sizes in CHAPTER_SIZES.values():
        values.update(numbers_in(sizes))
    ranks = {cfg.data.rank for cfg in PRESETS.values()} | {r for s in CHAPTER_SIZES.values() for r in s.ranks}
    values.update(rank / 9 for rank in ranks)  # the copying plateau r/9 (the task chapter derives it)
    for tokens in (BERT_TOKENS, GPT_TOKENS):  # token ids: 0, the largest value, the vocabulary
        values.update({tokens.zero_id, tokens.max_id, tokens.vocab_size})
    for module in library_modules():
        for name, value in vars(module).items():
            if name.isupper() and not name.startswith("_"):
                values.update(numbers_in(value))
            elif (inspect.isfunction(value) or inspect.isclass(value)) and not name.startswith("_") \
                    and getattr(value, "__module__", "") == module.__name__:
                try:
                    defaults = [p.default for p in inspect.signature(value).parameters.values()
                                if p.default is not inspect.Parameter.empty]
                except (TypeError, ValueError):
                    continue
                values.update(numbers_in(defaults))
    return frozenset(values)


def parameters_values(nb) -> set[float]:
    """The literals of a chapter's parameters cell."""
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    values = set()
    for cell in cells:
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Constant):
                values.update(numbers_in(node.value))
    return values


def allowed(text: str, pool) -> bool:
    """``text`` (a number as typed, perhaps with %) equals a value of ``pool`` at the precision it is typed."""
    percent = text.endswith("%")
    number = text.rstrip("% ")
    mantissa, _, exponent = number.partition("e")
    decimals = len(mantissa.partition(".")[2])
    tolerance = 0.5 * 10.0 ** (-decimals) * 10.0 ** int(exponent or 0) * (1 + 1e-9)
    x = parse(number)
    candidates = [(x, tolerance)] + ([(x / 100, tolerance / 100)] if percent else [])
    return any(abs(v - c) <= tol for c, tol in candidates for v in pool)


def offenders_in(text: str, page: str, extra: set[float] = frozenset()) -> list[tuple[str, str, str]]:
    """The numbers of markdown ``text`` on ``page`` that no rule lets through: (page, number, context)."""
    clean = TIMES.sub("×", TEX_POWER.sub(lambda m: f"1e{m.group(1)}", text))
    for pattern in (*SPANS, CITATION, YEAR):
        clean = pattern.sub(lambda m: " " * len(m.group(0)), clean)
    pool = paper_values() | setting_values() | extra
    found = []
    for match in NUMBER.finditer(clean):
        typed = match.group(0).strip()
        if (page, typed.rstrip("% ")) in ALLOWED or allowed(typed, pool):
            continue
        start, end = match.span()
        context = " ".join(text[max(0, start - 50):end + 30].split()) if len(clean) == len(text) else \
            " ".join(clean[max(0, start - 50):end + 30].split())
        found.append((page, typed, context))
    return found


def page_offenders(path: Path) -> list[tuple[str, str, str]]:
    if path.suffix == ".md":
        return offenders_in(path.read_text(), path.stem)
    nb = nbformat.read(path, as_version=4)
    extra = parameters_values(nb)
    return [o for cell in nb.cells if cell.cell_type == "markdown" for o in offenders_in(cell.source, path.stem, extra)]


def test_the_check_lets_citations_settings_and_glue_through_and_stops_a_result():
    pool_text = "As §3.2.1 and Figs. 11–12, App. J.2 (NeurIPS 2024): lr 1e-3, batch 128, $10^{-4}$, 7×7, 5x5, 30%."
    assert offenders_in(pool_text, "x") == []
    assert offenders_in("It drops at step {eval}`drop_step` (`seed = 3`), see {numref}`fig-12`.", "x") == []
    assert offenders_in("The paper's plateau is 0.224 and ours 0.1113.", "x") == [
        ("x", "0.1113", "The paper's plateau is 0.224 and ours 0.1113.")]
    assert [o[1] for o in offenders_in("It drops at step 16,406, 4.4× below.", "x")] == ["16,406", "4.4"]
    assert offenders_in("It drops at step 16,406.", "x", extra={16406.0}) == []


def test_the_allow_list_is_short_justified_and_needed():
    assert len(ALLOWED) <= 10 and all(len(why) > 20 for why in ALLOWED.values())
    pages = {path.stem: path for path in PAGES}
    saved = dict(ALLOWED)
    try:
        ALLOWED.clear()
        for page, number in saved:
            assert number in {typed.rstrip("% ") for _, typed, _ in page_offenders(pages[page])}, (page, number)
    finally:
        ALLOWED.update(saved)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_prose_types_no_result(path):
    offenders = page_offenders(path)
    for offender in offenders:
        print(offender)
    assert offenders == [], f"{len(offenders)} numbers in {path.name}'s prose come from no code"
