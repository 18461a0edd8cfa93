"""The store of derived tables (``matcomp.runs.derived``): exact round trips, keys that follow every
input, damaged tables refused or recomputed, stale ones recomputed, and the shipped tables current."""

import json
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from matcomp.analysis.baselines import completion_sweep
from matcomp.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from matcomp.models.bert import MatrixBert
from matcomp.runs import derived
from matcomp.runs.derived import (
    REFRESH,
    Derivation,
    DerivedError,
    import_closure,
    is_shipped,
    load_or_compute,
    read,
    ship,
    stale,
)
from matcomp.runs.folder import sha256_file
from matcomp.runs.run import Run

ROOT = Path(__file__).resolve().parents[1]
STEP = 10
SHA = "ab" * 32


def fake_run(root, sha: str = SHA) -> Run:
    """A finished run folder (named by its run id, as every reader requires) holding only what a key reads: its
    config and complete.json."""
    cfg = RunConfig(name="micro", data=DataConfig(n_rows=3, n_cols=3, rank=1), model=ModelConfig(hidden=16, layers=1,
                    heads=2), train=TrainConfig(steps=STEP, checkpoint_every=STEP))
    path = root / cfg.run_id
    path.mkdir(parents=True)
    (path / "config.json").write_text(cfg.to_json())
    recorded = {f"checkpoints/step_{STEP:06d}.safetensors": sha, "config.json": sha256_file(path / "config.json")}
    (path / "complete.json").write_text(json.dumps({"sha256": recorded}))
    return Run(path)


class Counted:
    """A compute function that counts its calls and returns ``tables``."""

    def __init__(self, tables, pause: float = 0.0):
        self.tables, self.calls, self.pause = tables, 0, pause

    def __call__(self):
        self.calls += 1
        time.sleep(self.pause)
        return self.tables


def awkward_table() -> pd.DataFrame:
    """Floats CSV at default precision would not keep (thirds, tenths, subnormals, extremes), NaN,
    negative numbers, ints and text, under a two-level index."""
    index = pd.MultiIndex.from_tuples([(2, "BERT"), (2, "nuclear norm min"), (3, "soft-impute, λ=0.001")],
                                      names=["rows", "method"])
    return pd.DataFrame({"L": [1 / 3, 0.1 + 0.2, 5e-324], "L_mask / E[X²]": [float("nan"), -1.7976931348623157e308,
                         2.220446049250313e-16], "dropped": [0, 7, 2 ** 53 - 1], "note": ["a", "b, c", "d\"e"]},
                        index=index)


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """An empty shipped folder, in place of runs/reference/derived."""
    root = tmp_path / "shipped"
    root.mkdir()
    monkeypatch.setattr(derived, "SHIPPED_ROOT", root)
    return root


def test_tables_round_trip_exactly_through_csv(tmp_path, store, shipped):
    data = DataConfig(n_rows=3, n_cols=3, rank=1)
    model = MatrixBert(ModelConfig(hidden=16, layers=1, heads=2)).eval()
    computed = {"awkward": awkward_table(), **completion_sweep(data, [0.2, 0.5], samples=5, lam=1e-3, model=model)}
    run = fake_run(tmp_path)
    derivation = Derivation("roundtrip", Counted(computed), [(run, STEP)], {"p": 0.1})
    first = load_or_compute(derivation)
    again, problem = read(derivation, store / "derived")
    assert problem is None and list(again) == list(computed) == list(first)
    for name, table in computed.items():
        pd.testing.assert_frame_equal(first[name], table, check_exact=True)
        pd.testing.assert_frame_equal(again[name], table, check_exact=True)
    sweep = again["sweep"]
    assert sweep["L"].tolist() == computed["sweep"]["L"].tolist()  # bit for bit, not approximately
    loss = sweep.loc[sweep.method == "BERT", "L"].iloc[0]  # an untrained model's, whose weights the worker's RNG drew:
    assert 0 < loss < float("inf")  # a loss at all (1.10 in one fresh clone, below 1 in others), not a bound on it


def test_a_table_that_csv_cannot_keep_is_refused_at_write(tmp_path, store, shipped):
    table = pd.DataFrame({"when": pd.to_datetime(["2024-01-01"])}).rename_axis("row")
    with pytest.raises(ValueError, match="does not read back exactly"):
        load_or_compute(Derivation("dates", Counted({"t": table})))
    with pytest.raises(ValueError, match="its own text name"):
        load_or_compute(Derivation("unnamed", Counted({"t": pd.DataFrame({"x": [1.0]})})))


def test_the_key_changes_with_a_parameter_a_checkpoint_and_a_version(tmp_path, monkeypatch):
    run = fake_run(tmp_path / "a")
    other = fake_run(tmp_path / "b", sha="cd" * 32)  # the same run, another checkpoint

    def key(checkpoints=((run, STEP),), params=None):
        return Derivation("sweep", Counted({}), checkpoints, params or {"samples": 512, "lam": 0.001}).key()

    base = key()
    assert key() == base and len(base) == 64
    assert key(params={"samples": 512, "lam": 0.0010000000000000002}) != base  # one ulp of a float parameter
    assert key(params={"samples": 511, "lam": 0.001}) != base
    assert key(checkpoints=((other, STEP),)) != base  # another checkpoint's SHA-256
    assert key(checkpoints=()) != base
    monkeypatch.setattr(derived, "versions", lambda: {"torch": "0.0"})
    assert key() != base
    with pytest.raises(ValueError, match="records no SHA-256"):
        Derivation("x", Counted({}), [(run, 20)]).key()


def package(root, files: dict[str, str]):
    """A package of modules written under ``root`` (importable: ``root`` goes on the path)."""
    for name, text in files.items():
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_key_holds_the_source_of_every_module_the_computation_can_reach(tmp_path, monkeypatch):
    """No list by hand: the module defining ``compute`` and what it imports, through other modules and
    inside functions, are hashed; a change two imports away gives a new key, and an unrelated one does not."""
    package(tmp_path, {"closurepkg.__init__": "", "closurepkg.unrelated": "X = 1\n",
                       "closurepkg.a": "def compute():\n    from closurepkg import b\n    return b.tables()\n",
                       "closurepkg.b": "import pandas as pd\nimport closurepkg.c\n\n\n"
                                       "def tables():\n    return {'t': pd.DataFrame({'x': [closurepkg.c.SCALE]})}\n",
                       "closurepkg.c": "SCALE = 1.0\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    import closurepkg.a

    derivation = Derivation("closure", closurepkg.a.compute)
    assert derivation.sources() == ("closurepkg", "closurepkg.a", "closurepkg.b", "closurepkg.c")
    base = derivation.key()
    (tmp_path / "closurepkg" / "unrelated").with_suffix(".py").write_text("X = 2\n")
    assert derivation.key() == base
    (tmp_path / "closurepkg" / "c").with_suffix(".py").write_text("SCALE = 2.0  # two imports away\n")
    assert derivation.key() != base


def test_the_key_holds_the_code_not_its_comments_or_docstrings(tmp_path, monkeypatch):
    """Rewording a module's, a class's or a function's docstring or a comment keeps the key (the shipped tables
    stay current); a changed string, number or name in the code does not, nor a blank line inside a string."""
    package(tmp_path, {"wordedpkg.__init__": "",
                       "wordedpkg.a": ('"""Module."""\nSCALE = 1.0  # why\n\n\nclass T:\n    """Holds."""\n'
                                       '    unit = "# not a comment"\n\n\ndef compute():\n'
                                       '    """Doc."""\n    return {}\n')})
    monkeypatch.syspath_prepend(str(tmp_path))
    import wordedpkg.a

    derivation = Derivation("worded", wordedpkg.a.compute)
    source = (tmp_path / "wordedpkg" / "a").with_suffix(".py")
    text, base = source.read_text(), derivation.key()
    for old, new in [('"""Module."""', '"""The module, ×\nreworded."""'), ("# why", "# another reason, ‖x‖"),
                     ('"""Holds."""', "'''Holds what it holds.'''"), ('"""Doc."""', '"""Doc."""  # and a comment')]:
        source.write_text(text.replace(old, new))
        assert derivation.key() == base, new
    for old, new in [("SCALE = 1.0", "SCALE = 2.0"), ('"# not a comment"', '"# not one"'),
                     ("return {}", "return {1: 2}")]:
        source.write_text(text.replace(old, new))
        assert derivation.key() != base, new
    keys = []
    for value in ('"""a\nb"""', '"""a\n\nb"""'):  # a string's value, which a blank line changes
        source.write_text(text.replace('"# not a comment"', value))
        keys.append(derivation.key())
    assert keys[0] != keys[1]


def test_the_shipped_tables_keys_reach_the_modules_the_hand_lists_left_out():
    """What the lists written by hand missed, which the closure holds: the drop detection and the run
    folders the phases and checkpoints are read through, the presets, the model factory."""
    from matcomp.book.build.stored import shipped_derivations

    shipped = shipped_derivations()
    for derivation in [d for d in shipped if d.name == "completion_sweep"] + [d for d in shipped
                                                                            if d.name.startswith("ood_")][:1]:
        assert {"matcomp.drop", "matcomp.runs.run", "matcomp.runs.folder", "matcomp.models.factory",
                "matcomp.analysis.baselines", "matcomp.data"} <= set(derivation.sources())
    key_numbers = import_closure("matcomp.analysis.key_numbers")
    assert {"matcomp.presets", "matcomp.analysis.heads", "matcomp.analysis.probing"} <= set(key_numbers)
    assert "matcomp.book.chapter" not in key_numbers and "matcomp.cli" not in key_numbers  # what reads tables


def test_a_stored_table_is_read_not_recomputed_and_a_stale_one_is_recomputed(tmp_path, store, shipped, monkeypatch):
    package(tmp_path, {"fake_analysis": "import pandas as pd\n\nSCALE = 1\ncalls = []\n\n\ndef compute():\n"
                                        "    calls.append(1)\n    return {'t': pd.DataFrame({'L': [0.125, 1 / 3]}, "
                                        "index=pd.Index([0.1, 0.3], name='p_mask'))}\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    import fake_analysis

    derivation = Derivation("stale", fake_analysis.compute, params={"samples": 4})
    load_or_compute(derivation)
    load_or_compute(derivation)
    assert len(fake_analysis.calls) == 1  # the second read came from the store
    old = derivation.key()
    source = (tmp_path / "fake_analysis").with_suffix(".py")
    source.write_text(source.read_text().replace("SCALE = 1", "SCALE = 2  # the code changed"))
    assert derivation.key() != old
    load_or_compute(derivation)
    assert len(fake_analysis.calls) == 2  # recomputed under its new key, the old table never read
    load_or_compute(Derivation("stale", fake_analysis.compute, params={"samples": 5}))
    assert len(fake_analysis.calls) == 3


def test_a_damaged_shipped_table_is_an_error_naming_git_checkout(store, shipped):
    table = pd.DataFrame({"L": [0.5, 0.25]}, index=pd.Index([1, 2], name="rank"))
    derivation = Derivation("damaged", Counted({"losses": table}), params={"n": 2})
    manifest, new = ship(derivation)
    assert new and manifest.parent == shipped and load_or_compute(derivation)["losses"].equals(table)
    csv = next(shipped.glob("damaged-*.losses.csv"))
    csv.write_text(csv.read_text().replace("0.5", "0.6"))
    with pytest.raises(DerivedError, match=r"is damaged: .*SHA-256 differs\); restore it from git \(git checkout -- "):
        load_or_compute(derivation)
    assert "\n" not in str(pytest.raises(DerivedError, load_or_compute, derivation).value)


def test_a_damaged_working_table_is_recomputed(store, shipped):
    compute = Counted({"t": pd.DataFrame({"L": [0.5]}, index=pd.Index([1], name="rank"))})
    derivation = Derivation("working", compute)
    load_or_compute(derivation)
    csv = next((store / "derived").glob("working-*.t.csv"))
    csv.write_text("rank,L\n1,0.75\n")
    assert load_or_compute(derivation)["t"]["L"].tolist() == [0.5] and compute.calls == 2


def test_ship_replaces_the_shipped_tables_of_an_older_key(store, shipped):
    table = pd.DataFrame({"L": [0.5]}, index=pd.Index([1], name="rank"))
    first = Derivation("panel", Counted({"t": table}), params={"samples": 1})
    second = Derivation("panel", Counted({"t": table * 2}), params={"samples": 2})
    ship(first)
    assert not stale(first) and len(stale(second)) == 2  # the old manifest and its table
    ship(second)
    assert sorted(p.name.split(".")[0] for p in shipped.iterdir()) == [second.stem()] * 2
    assert ship(second)[1] is False  # already current: nothing written


def test_two_processes_asking_at_once_compute_once(store, shipped):
    compute = Counted({"t": pd.DataFrame({"L": [0.5]}, index=pd.Index([1], name="rank"))}, pause=0.3)
    derivation = Derivation("locked", compute)
    results = []
    threads = [threading.Thread(target=lambda: results.append(load_or_compute(derivation))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compute.calls == 1 and len(results) == 2 and results[0]["t"].equals(results[1]["t"])


def test_the_shipped_tables_are_those_the_code_would_compute():
    """A shipped table whose key no longer matches (a checkpoint, parameter, line of code or library version
    changed) fails here, naming the command that refreshes it, rather than being silently recomputed
    by every build."""
    from matcomp.book.build.plan import plan
    from matcomp.book.build.stored import shipped_derivations
    from matcomp.book.chapter import ladder_configs, paper_scale_configs
    from matcomp.book.chapters import chapter_specs
    from matcomp.presets import DEFAULT_PRESET
    from matcomp.runs.shipped import find_reference

    derivations = shipped_derivations()
    names = [d.name for chapter in chapter_specs() if chapter.derivations for d in chapter.derivations(DEFAULT_PRESET)]
    paper_scale = paper_scale_configs(DEFAULT_PRESET)  # seed 0 of the paper's run, trained on a lent GPU
    assert len(paper_scale) == 1
    configs = [*(cfg for seeds in ladder_configs(DEFAULT_PRESET).values() for cfg in seeds.values()),
               *paper_scale.values()]
    assert {cfg.run_id for cfg in configs} <= {p.cfg.run_id for p in plan(DEFAULT_PRESET)}  # the book's own runs
    runs = [find_reference(cfg) for cfg in configs]  # the ladder's order: 4x4, 5x5, 7x7 seeds 0-6, the paper's run
    dropped = [run.path.name for run in runs if run.drop.half_step is not None]
    judged = [chapter for chapter in chapter_specs()  # the book's order: those whose numbers read checkpoints
              if chapter.key_numbers and not chapter.key_numbers.metrics_only]
    ladder = [f"key_numbers_{chapter.name}_{run.path.name}" for chapter in judged for run in runs
              if run.path.name in dropped or any(number.pre_shift for number in chapter.key_numbers.numbers)]
    assert names and 0 < len(dropped) < len(runs)  # the 7x7 seeds that never dropped: their pre-shift numbers alone
    assert [d.name for d in derivations] == names + ladder
    for derivation in derivations:
        assert is_shipped(derivation), (
            f"runs/reference/derived holds no current {derivation.name} table (its inputs or code changed since "
            f"it was computed): refresh the shipped tables with `{REFRESH}` and commit runs/reference/derived")
        assert not stale(derivation), f"stale files of {derivation.name} left: {stale(derivation)}; run `{REFRESH}`"
    stems = {d.stem() for d in derivations}
    unknown = sorted(p.name for p in derived.SHIPPED_ROOT.iterdir() if p.name.split(".")[0] not in stems)
    assert not unknown, f"files no shipped derivation reads: {unknown}; `{REFRESH}` replaces them"


def test_requirements_pin_every_library_the_keys_hold_at_the_installed_version():
    """A fresh install computes the keys the shipped tables were written under only if it installs the versions they
    hold: each library of ``VERSIONED`` is pinned in requirements.txt at the version installed here."""
    pins = dict(line.split("#")[0].strip().split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line.split("#")[0])
    for name, installed in derived.versions().items():
        assert name in pins, f"requirements.txt does not pin {name}, whose version the shipped tables' keys hold"
        assert installed.split("+")[0] == pins[name], f"{name} {installed} installed; requirements.txt: {pins[name]}"
