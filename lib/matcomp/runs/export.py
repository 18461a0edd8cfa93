"""One checkpoint of a finished run as a folder that plain ``transformers`` loads (``python -m matcomp export``),
so a researcher reads the model with their own tools, without this library:

    <out>/
        config.json          a plain BertConfig (model_type "bert": its real vocab_size and intermediate_size),
                             or GPT2Config for a GPT run, plus ``matcomp``: the run, the step, its whole config
                             and the token code
        model.safetensors    the weights of ``BertModel`` (``GPT2LMHeadModel``) alone: a strict load, no key
                             missing or unexpected (the BERT has no pooler: ``add_pooling_layer=False``)
        readout.safetensors  the BERT's read-out, ``torch.nn.Linear(hidden, 1)``: ``weight``, ``bias``
        README.md            the model card (``matcomp.runs.card``)

The tensors are the checkpoint's own, in its own dtype (a run brought home in bf16 exports bf16, and
``config.json``'s ``dtype`` says so; the library computes in float32 on them, as ``dtype=torch.float32`` does
in ``from_pretrained``). The folder is written beside ``out`` and moved into place whole; every problem with
the input is named before anything is read or written (``export_problem``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import PretrainedConfig

from matcomp.models.bert import bert_config
from matcomp.models.gpt import gpt2_config
from matcomp.runs.card import CARD, model_card
from matcomp.runs.run import Run, open_run
from matcomp.runs.shipped import REFERENCE_ROOT
from matcomp.runs.store import runs_root
from matcomp.tokenizer import BERT_TOKENS, DECIMALS, GPT_TOKENS, MASK_ID, STEPS_PER_UNIT

MODEL, READOUT = "model.safetensors", "readout.safetensors"
ARCHITECTURE = {"bert": "BertModel", "gpt": "GPT2LMHeadModel"}  # the transformers class each export loads into
FILES = {"bert": {"bert.": MODEL, "readout.": READOUT}, "gpt": {"gpt.": MODEL}}  # checkpoint key prefix -> file


@dataclass(frozen=True)
class Exported:
    """What ``export`` wrote: the folder, the run and step it holds, and the dtype of its tensors."""

    path: Path
    run: Run
    step: int
    dtype: str


def find_run(name: str) -> Run:
    """The finished run ``name`` names: a run folder, or a run id in the shipped store (``runs/reference``) or the
    working store; checked whole (``open_run``). Anything else is a ValueError naming where it was looked for."""
    if not name:
        raise ValueError("the run is empty (an unset shell variable?): name a run id or a run folder "
                         "(python -m matcomp runs lists them)")
    path = Path(name)
    candidates = [path] if path.is_dir() or len(path.parts) > 1 else [REFERENCE_ROOT / name, runs_root() / name]
    found = next((p for p in candidates if p.is_dir()), None)
    if found is None:
        raise ValueError(f"unknown run {name!r}: neither a run folder nor a run id in {REFERENCE_ROOT} or "
                         f"{runs_root()} (python -m matcomp runs lists them)")
    return open_run(found)


def token_code(arch: str) -> dict:
    """How a matrix becomes token ids for a model of ``arch`` (``matcomp.tokenizer``), as ``config.json`` records it."""
    tokens = BERT_TOKENS if arch == "bert" else GPT_TOKENS
    code = {"value_id": f"{tokens.zero_id} + {STEPS_PER_UNIT}*x", "zero_id": tokens.zero_id,
            "ids_per_unit": STEPS_PER_UNIT, "decimals": DECIMALS, "values": [-tokens.value_max, tokens.value_max],
            "mask_id": MASK_ID, "vocab_size": tokens.vocab_size, "order": "row-major"}
    return code if tokens.sep_id is None else {**code, "sep_id": tokens.sep_id}


def hf_config(run: Run, step: int, dtype: str) -> PretrainedConfig:
    """The plain ``transformers`` config of ``run``'s model (the one the library builds it from), with its class,
    the dtype of the exported tensors and, under ``matcomp``, what the weights are and how a matrix is tokenised."""
    model = run.config.model
    config = bert_config(model) if model.arch == "bert" else gpt2_config(model)
    config.architectures = [ARCHITECTURE[model.arch]]
    config.dtype = dtype
    config.matcomp = {"run_id": run.config.run_id, "step": step, "tokens": token_code(model.arch),
                      "readout": READOUT if model.arch == "bert" else None,
                      "config": json.loads(run.config.to_json())}
    return config


def export_problem(run: Run, step: int | None, out: Path | str) -> str | None:
    """Why ``run`` at ``step`` (None: its last checkpoint) cannot be exported into ``out``, or None: a run with no
    checkpoint, a step that is not one, or a folder that is not new (or empty) and writable."""
    if not run.steps:
        return (f"{run.config.run_id} is shipped with its metrics alone: there are no weights to export (train it "
                f"with python -m matcomp train ... --no-shipped for its checkpoints)")
    if step is not None and step not in run.steps:
        return f"step {step} is not a checkpoint of {run.config.run_id}; its checkpoints: {run.steps}"
    return _out_problem(Path(out)) if str(out) else "--out is empty (an unset shell variable?): name a new folder"


def _out_problem(out: Path) -> str | None:
    """Why ``out`` cannot become the export's folder: it is a file, a folder with something in it, or it cannot be
    written (a real write is tried: permissions alone do not tell)."""
    if out.exists():
        if not out.is_dir():
            return f"--out {out} is a file; name a new folder"
        if any(out.iterdir()):
            return f"--out {out} exists and is not empty; name a new or empty folder (nothing is overwritten)"
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        return f"--out {out} lies under the file {existing}; name a folder"
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as err:
        return f"--out {out} cannot be written ({err.strerror} in {existing}); name a folder you can write"
    return None


def split_weights(run: Run, weights: dict[str, torch.Tensor]) -> dict[str, dict[str, torch.Tensor]]:
    """A checkpoint's tensors by the file they go to (``FILES``), their prefix dropped: ``bert.*`` is ``BertModel``'s
    own state dict, ``readout.*`` the read-out's. A key of no known part is a ValueError (nothing is left behind)."""
    parts: dict[str, dict[str, torch.Tensor]] = {name: {} for name in FILES[run.config.model.arch].values()}
    for key, tensor in weights.items():
        prefix = next((p for p in FILES[run.config.model.arch] if key.startswith(p)), None)
        if prefix is None:
            raise ValueError(f"{run.config.run_id}'s checkpoint holds {key!r}, which is neither part of the "
                             f"{ARCHITECTURE[run.config.model.arch]} nor its read-out")
        parts[FILES[run.config.model.arch][prefix]][key.removeprefix(prefix)] = tensor.contiguous()
    return parts


def export(run: Run, out: Path | str, step: int | None = None) -> Exported:
    """Write ``run``'s checkpoint at ``step`` (default: its last) into the new folder ``out`` (see the module
    docstring); a problem with the input is a ValueError before any work (``export_problem``)."""
    problem = export_problem(run, step, out)
    if problem is not None:
        raise ValueError(problem)
    step = run.steps[-1] if step is None else step
    out = Path(out)
    weights = run.folder.read_checkpoint(step)  # as stored: a bf16 checkpoint stays bf16 (open_run checked its bytes)
    dtypes = {str(t.dtype).removeprefix("torch.") for t in weights.values() if t.is_floating_point()}
    if len(dtypes) != 1:
        raise ValueError(f"{run.config.run_id}'s checkpoint {step} mixes floating-point dtypes {sorted(dtypes)}")
    dtype = dtypes.pop()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".exporting"))
    try:
        for name, tensors in split_weights(run, weights).items():
            save_file(tensors, staging / name, metadata={"format": "pt"})  # "pt": what transformers expects
            os.chmod(staging / name, 0o644)  # written private; an export is meant to be shared
        hf_config(run, step, dtype).save_pretrained(staging)
        (staging / CARD).write_text(model_card(run, exported=(step, out.name, dtype)))
        os.chmod(staging, 0o755)  # mkdtemp makes the folder private
        if out.exists():
            out.rmdir()  # empty (export_problem): the export takes its place
        staging.rename(out)  # the folder appears whole or not at all
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Exported(out, run, step, dtype)
