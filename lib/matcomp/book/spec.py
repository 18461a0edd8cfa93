"""A chapter declared once, in its own module (``matcomp.book.chapters.<chapter>.CHAPTER``): its parameters and
their defaults, the runs it reads, the derived tables it ships, the key numbers its claims are judged on and
the typed result of its opening. ``plan``, ``stored``, ``summary``, the ladder and the chapter's own first cell
read this declaration; so does a sweep, which checks its points against it. ``tests/test_chapter_spec.py`` fails
where a notebook's ``parameters`` cell (what papermill injects into) disagrees with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from matcomp.analysis import key_numbers as reading
from matcomp.analysis.phases import Phases
from matcomp.book.chapter import check_environment
from matcomp.book.judging.verdicts import MIN_SAMPLES, SAMPLE_COUNTS, Claim
from matcomp.book.parameters import MODEL, PRESET, check_values, parameter
from matcomp.config import RunConfig
from matcomp.runs.derived import Derivation
from matcomp.runs.run import Run


@dataclass(frozen=True)
class Parameters:
    """What every chapter takes: its scale (``preset``; None: ``$MATCOMP_PRESET``, else ``cpu``). A chapter's own
    fields each carry their rule (``book.parameters.parameter``); its first cell makes them from its ``parameters``
    cell (``ChapterSpec.check``) and hands them whole to its ``setup``."""

    preset: str | None = parameter(None, PRESET)

    def at_scale(self, preset: str) -> Parameters:
        """These parameters with each None that stands for the scale's value replaced by ``preset``'s, where the
        chapter's key numbers or shipped tables read it (the chapter overrides this); the others as they are."""
        return self


@dataclass(frozen=True)
class RunParameters(Parameters):
    """A chapter that trains or reads its scale's runs: also the seed (None: ``$MATCOMP_SEED``, else the preset's)
    and config changes applied after ``$MATCOMP_SET``."""

    seed: int | None = None
    overrides: str = ""


@dataclass(frozen=True)
class OneModelParameters(RunParameters):
    """A one-model chapter's: also the trained model it analyses, as a preset's name (None: the scale's one-model
    preset, ``ChapterSizes.one_model``), named apart from a config's ``model`` and a run's ``bert()``."""

    one_model: str | None = parameter(None, MODEL)


@dataclass(frozen=True)
class KeyNumber:
    """One judged number of a finding, declared once, in its chapter's module (how far below its plateau a run
    ends, shown on every ladder, in the judging layer: ``judging.ladder.DEPTH``): ``id`` (its reader's key, a Python
    name: stored tables, ladders and glued names use it), ``label`` (how tables and sentences show it, there
    only), ``claim`` (the paper's on it: a value or a side, whether the bound is ours, which way training still
    moves it), ``pre_shift`` (read on the pre-shift model alone, which a seed that never dropped still has),
    ``check`` (where it holds by construction in any model, or any that dropped, what it checks, as the ladder
    shows it apart: it checks the method and is never judged as a finding), ``tests`` (the keys of the
    register's claims it judges, ``matcomp.book.judging.register``) and ``from_code`` (it reads a variant the authors'
    released code runs, not the experiment the text describes: attributed to the code wherever the paper's
    places are shown)."""

    id: str
    label: str
    claim: Claim
    pre_shift: bool = False
    check: str = ""
    tests: tuple[str, ...] = ()
    from_code: bool = False

    def __post_init__(self):
        if not self.id.isidentifier():
            raise ValueError(f"a key number's id must be a Python name (it names glued values); got {self.id!r}")


@dataclass(frozen=True)
class KeyNumbers:
    """A finding's key numbers (``numbers``, each a ``KeyNumber``, in the order its tables show them) and how they
    are read on one run: ``read`` gives them by id, each an ``Estimate`` (``matcomp.analysis.key_numbers``; its
    keywords name the chapter's parameters it reads), from the run's pre- and post-shift checkpoints, or, with
    ``metrics_only``, from its metrics alone (the drop's numbers: every seed trained can be read, none is
    stored)."""

    read: reading.Reader
    numbers: tuple[KeyNumber, ...]
    metrics_only: bool = False

    def __post_init__(self):
        for what, names in (("id", [n.id for n in self.numbers]), ("label", [n.label for n in self.numbers])):
            if len(set(names)) < len(names):
                raise ValueError(f"key numbers of one {what} declared twice: "
                                 f"{sorted({name for name in names if names.count(name) > 1})}")

    @property
    def by_id(self) -> dict[str, KeyNumber]:
        return {number.id: number for number in self.numbers}


@dataclass(frozen=True)
class ChapterSpec:
    """One chapter: ``parameters`` (a ``Parameters`` dataclass: names, types and defaults), ``runs(preset)`` (the
    runs it reads with its defaults, built from the calls it makes), ``key_numbers`` (the numbers its ladder
    judges and the paper's claims on them), ``derivations(preset)`` (the slow tables of its default build that
    are shipped), ``opening`` (the typed ``NamedTuple`` its ``setup`` returns, which the notebook unpacks by
    its field names) and ``quoted()`` (the default preset's runs whose numbers its prose quotes at every preset,
    so that the plan of any preset lists them)."""

    name: str
    parameters: type[Parameters]
    runs: Callable[[str], list[RunConfig]]
    key_numbers: KeyNumbers | None = None
    derivations: Callable[[str], list[Derivation]] | None = None
    opening: type[tuple] | None = None
    quoted: Callable[[], list[RunConfig]] | None = None

    def defaults(self, preset: str | None = None) -> dict:
        """The parameters' defaults, name -> value, as the notebook's cell holds them; with ``preset``, at that
        scale (``Parameters.at_scale``)."""
        values = self.parameters()
        return asdict(values.at_scale(preset) if preset is not None else values)

    def check(self, namespace: dict) -> Parameters:
        """The chapter's ``Parameters`` as its notebook holds them (``namespace``: its ``globals()``, holding its
        parameters and papermill's injected ones), refusing by name what the chapter would not use: a name it has
        no parameter of (papermill's ``-p presett smoke`` only warns, and the chapter would run at its default),
        a value its field's rule refuses (``parameters_of``), and what the environment gives wrongly
        (``chapter.check_environment``)."""
        known = self.defaults()
        literals = (type(None), bool, int, float, str, list, tuple, dict)
        given = {name: value for name, value in namespace.items() if not name.startswith("_")
                 and name not in ("In", "Out") and isinstance(value, literals)}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"the {self.name} chapter has no parameter {', '.join(map(repr, unknown))}; its "
                             f"parameters: {', '.join(known)}")
        p = self.parameters_of({name: value for name, value in given.items() if name in known})
        check_environment(p.preset)
        return p

    def parameters_of(self, values: dict) -> Parameters:
        """The chapter's ``Parameters`` holding ``values`` (name -> value, each a parameter of the chapter; the
        others at their defaults), refusing by name a value its field's rule refuses (``book.parameters``) and a
        sample count its key numbers' verdicts cannot rest on (``verdicts.MIN_SAMPLES``): what the first cell
        and a sweep's points are both held to."""
        check_values(self.name, self.parameters, values)
        read = () if self.key_numbers is None else reading.reader_parameters(self.key_numbers.read)
        for name in set(read) & set(SAMPLE_COUNTS):
            if isinstance(values.get(name), int) and values[name] < MIN_SAMPLES:
                raise ValueError(f"the {self.name} chapter's parameter {name} = {values[name]} cannot carry its "
                                 f"verdicts: the paper's claims are judged on at least {MIN_SAMPLES} matrices "
                                 f"(matcomp.book.judging.verdicts.MIN_SAMPLES)")
        return self.parameters(**values)

    def disagreements(self, cell: dict) -> list[str]:
        """Where a notebook's ``parameters`` cell (name -> default, ``book.build.sweep.notebook_parameters``) and this
        declaration differ: a name one has and the other lacks, or a default that is not the same."""
        declared = self.defaults()
        missing = [f"{name}: declared, not in the cell" for name in declared if name not in cell]
        extra = [f"{name}: in the cell, not declared" for name in cell if name not in declared]
        differ = [f"{name}: {cell[name]!r} in the cell, {declared[name]!r} declared" for name in declared
                  if name in cell and cell[name] != declared[name]]
        return missing + extra + differ

    def judged_numbers(self) -> KeyNumbers:
        """The chapter's key numbers, refused by name where it judges none."""
        if self.key_numbers is None:
            raise ValueError(f"the {self.name} chapter judges no key numbers")
        return self.key_numbers

    def key_numbers_derivation(self, run: Run, phases: Phases, params: dict) -> Derivation:
        """The stored derivation of the chapter's key numbers on ``run`` at ``phases`` with ``params``; none for
        numbers read on a run's metrics alone, which are read, not stored."""
        if self.judged_numbers().metrics_only:
            raise ValueError(f"the {self.name} chapter's key numbers are read on a run's metrics, not stored")
        return reading.key_numbers_derivation(self.name, self.judged_numbers().read, run, phases, params)

    def read_key_numbers(self, run: Run, phases: Phases, params: dict) -> dict[str, reading.Estimate]:
        """The chapter's key numbers on ``run`` at ``phases`` with ``params`` (shipped, stored, or computed), by
        id."""
        return reading.key_numbers(self.name, self.judged_numbers().read, run, phases, params)
