"""Each chapter is declared once, in its module (``matcomp.book.spec``): the notebook's ``parameters`` cell, which
papermill injects into, must say the same, and the declaration's check refuses what the chapter would not use."""

import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

from matcomp.analysis.key_numbers import reader_parameters
from matcomp.book.build.sweep import notebook_annotations, notebook_parameters
from matcomp.book.chapters import CHAPTERS, chapter_spec, chapter_specs

BOOK = Path(__file__).resolve().parents[1] / "book"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_notebook_s_parameters_cell_is_its_chapter_s_declaration(chapter):
    assert chapter_spec(chapter).disagreements(notebook_parameters(BOOK / f"{chapter}.ipynb")) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_notebook_s_parameters_cell_annotates_each_parameter_with_its_declared_type(chapter):
    """``papermill --help-notebook`` shows the cell's annotations: they must be the declaration's types."""
    def declared(kind: str) -> str:  # the cell writes "X | None" as Optional[X], which papermill's parser reads
        return f"Optional[{kind.removesuffix(' | None')}]" if kind.endswith(" | None") else kind

    fields = dataclasses.fields(chapter_spec(chapter).parameters)
    assert notebook_annotations(BOOK / f"{chapter}.ipynb") == {f.name: declared(str(f.type)) for f in fields}


def test_a_changed_default_or_name_in_the_cell_is_a_disagreement(tmp_path):
    nb = json.loads((BOOK / "probing.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    cell["source"] = "".join(cell["source"]).replace("test_matrices: int = 256", "test_matrices: int = 255").replace(
        "train_matrices", "fit_matrices")
    (tmp_path / "probing.ipynb").write_text(json.dumps(nb))
    found = chapter_spec("probing").disagreements(notebook_parameters(tmp_path / "probing.ipynb"))
    assert found == ["train_matrices: declared, not in the cell", "fit_matrices: in the cell, not declared",
                     "test_matrices: 255 in the cell, 256 declared"]


def test_the_check_refuses_a_name_the_chapter_lacks_and_a_value_its_rule_refuses():
    probing = chapter_spec("probing")
    p = probing.check({"preset": "smoke", "train_matrices": 64, "In": [], "_": 1, "chapter": object()})
    assert p == probing.parameters(preset="smoke", train_matrices=64) and p.test_matrices == 256
    with pytest.raises(ValueError, match="the probing chapter has no parameter 'presett'"):
        probing.check({"presett": "smoke"})
    with pytest.raises(ValueError, match="probing chapter's parameter test_matrices must be an integer >= 1"):
        probing.check({"test_matrices": 0})


def test_a_rule_sits_on_its_field_and_a_list_default_is_each_instance_s_own():
    from matcomp.book.parameters import COUNTS, RULE

    width_depth = chapter_spec("width_depth")
    depths = next(f for f in dataclasses.fields(width_depth.parameters) if f.name == "depths")
    assert depths.metadata[RULE] is COUNTS and depths.default is None
    assert width_depth.parameters_of({"depths": [2, 4]}).depths == [2, 4]
    with pytest.raises(ValueError, match=r"width_depth chapter's parameter depths must be a non-empty list of "
                                         r"integers >= 1, e.g. \[2, 4\], or None for the scale's; got \[0\]"):
        width_depth.parameters_of({"depths": [0]})
    progress = chapter_spec("progress").parameters
    first, second = progress(), progress()
    assert first.windows == [1, 3, 5, 9] and first.windows is not second.windows
    with pytest.raises(ValueError, match=r"progress chapter's parameter windows must be a non-empty list of "
                                         r"integers >= 1, e.g. \[2, 4\]; got None"):
        chapter_spec("progress").parameters_of({"windows": None})  # None stands for no scale's value here


@pytest.mark.parametrize("chapter", [s.name for s in chapter_specs() if hasattr(inspect.getmodule(s.parameters),
                                                                                 "setup")])
def test_a_chapter_s_setup_takes_its_parameters_whole_as_its_first_cell_makes_them(chapter):
    """One argument, the chapter's ``Parameters``: a parameter added to the declaration reaches ``setup`` without
    a signature and a call to change in step."""
    setup = inspect.getmodule(chapter_spec(chapter).parameters).setup
    assert [(name, arg.annotation) for name, arg in inspect.signature(setup).parameters.items()] == [
        ("p", "Parameters")]
    sources = ["".join(c["source"]) for c in json.loads((BOOK / f"{chapter}.ipynb").read_text())["cells"]
               if c["cell_type"] == "code"]
    assert sum(s.count("p = chapter.CHAPTER.check(globals())") for s in sources) == 1
    assert [call for s in sources for call in re.findall(r"chapter\.setup\([^)]*\)", s)] == ["chapter.setup(p)"]


def test_a_chapter_s_values_at_a_scale_fill_what_its_none_stands_for():
    nuclear = chapter_spec("nuclear_norm")
    assert nuclear.defaults()["samples"] is None
    assert nuclear.defaults("cpu")["samples"] == 512 and nuclear.defaults("smoke")["samples"] == 32
    ood = chapter_spec("ood").parameters()
    assert ood.counts("cpu") == (3, 2000) and ood.counts("smoke") == (3, 100) and ood.after_drop is None


def test_the_one_model_chapters_declare_the_key_numbers_the_ladders_read():
    judged = [s.name for s in chapter_specs() if s.key_numbers is not None]
    assert judged == ["sudden_drop", "copying_phase", "nuclear_norm", "observed_entries", "attention_patching",
                      "head_taxonomy", "embeddings", "probing"]
    for chapter in (s for s in chapter_specs() if s.key_numbers is not None):  # what its reader takes, it declares
        assert set(reader_parameters(chapter.key_numbers.read)) <= set(chapter.defaults()), chapter.name
    assert [s.name for s in chapter_specs() if s.key_numbers and s.key_numbers.metrics_only] == ["sudden_drop"]
    assert reader_parameters(chapter_spec("head_taxonomy").key_numbers.read) == (
        "samples", "eval_seed", "mass", "enrichment", "identity_enrichment", "mask_ratio", "near")


@pytest.mark.parametrize("chapter", [s.name for s in chapter_specs() if s.opening is not None])
def test_a_notebook_unpacks_its_chapter_s_opening_by_the_names_it_declares(chapter):
    """``setup`` returns a typed ``Opening``; the notebook's unpacking names its fields in their order, so a field
    added or moved in one place and not the other fails here rather than binding a value to the wrong name."""
    import ast

    declared = chapter_spec(chapter)
    module = inspect.getmodule(declared.parameters)
    assert inspect.signature(module.setup).return_annotation in ("Opening", declared.opening)
    cells = [c for c in json.loads((BOOK / f"{chapter}.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    trees = [ast.parse("".join(c["source"])) for c in cells]
    unpacked = [[t.id for t in node.targets[0].elts] for tree in trees for node in ast.walk(tree)
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func) == "chapter.setup"]
    assert unpacked == [list(declared.opening._fields)]
