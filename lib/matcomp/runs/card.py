"""A run's model card, generated from the run's own files (``config.json``, ``metrics.parquet``, ``complete.json``)
so its numbers never drift from the run: what the model is, the task and token code, how it was trained and where
it stopped, its losses, how to load it and what it is for.

Two places hold one: an export's ``README.md`` (``matcomp.runs.export``; the Hugging Face convention), and the
folder of each shipped run of a paper-scale preset (``CARDED``), written by ``python -m matcomp card`` and
committed. There the card is **not part of the run's seal**: ``complete.json`` records what the run *is* (its
config, metrics and checkpoints, each checked by its SHA-256 as it is read); the card only describes them, so
sealing it would make a rewording re-seal the run. ``verify`` checks the files the seal lists and no others, so
a folder with its card reads as finished; ``tests/test_export.py`` checks that each committed card is the one
the generator writes now, and that the folder still verifies.
"""

from __future__ import annotations

from pathlib import Path

from matcomp.data import FACTOR_VARIANCE, second_moment
from matcomp.drop import FINAL_STEPS, Drop, final_losses
from matcomp.models.factory import metric_names, parameter_count
from matcomp.runs.run import Run
from matcomp.runs.shipped import REFERENCE_ROOT
from matcomp.tokenizer import BERT_TOKENS, DECIMALS, GPT_TOKENS, MASK_ID, STEPS_PER_UNIT

CARD = "README.md"  # the card's name in a run folder and in an export: what GitHub and the Hugging Face Hub show
CARDED = ("paper", "paper12", "paper_gpt")  # the presets whose shipped run folders carry their card
LICENSE_ID = "mit"  # the repository's LICENSE, as an export's card declares it
PAPER = ("Gopalani, Lubana & Hu, *Abrupt Learning in Transformers: A Case Study on Matrix Completion* "
         "(NeurIPS 2024)")
SNIPPET_BATCH = 64  # matrices the loading snippet completes: a quick run on a CPU at the paper's width
PRECISION = {"fp32": "float32", "bf16": "bf16 autocast on the forward pass (float32 weights, Adam and losses)",
             "tf32": "TF32 matrix products (float32 weights, Adam and losses)"}


def carded_runs(root: Path | None = None) -> list[Run]:
    """The shipped runs (in ``root``, default ``runs/reference``) whose folder carries a card: those of ``CARDED``."""
    return [Run(path) for path in sorted((root or REFERENCE_ROOT).glob("*-*"))
            if path.is_dir() and path.name.rsplit("-", 1)[0] in CARDED]


def export_folder(run: Run) -> str:
    """The folder name the card's export command writes: the one its loading snippet reads."""
    return f"{run.config.run_id}-hf"


def model_card(run: Run, exported: tuple[int, str, str] | None = None) -> str:
    """The card of ``run``: for its folder, or with ``exported`` (step, folder name, dtype) for an export's
    ``README.md``, which opens with the Hub's metadata and loads the folder it lies in."""
    cfg, arch = run.config, run.config.model.arch
    front = ("---\nlibrary_name: transformers\nlicense: " + LICENSE_ID + "\ntags: [" + ("bert" if arch == "bert"
             else "gpt2") + ", matrix-completion, abrupt-learning]\n---\n\n") if exported else ""
    made = (f"`python -m matcomp export {cfg.run_id}` wrote this folder" if exported else
            "`python -m matcomp card` wrote this card")
    return front + "\n\n".join([
        f"# {cfg.run_id}: {_title(run)}",
        f"<!-- {made} from the run's config.json, metrics.parquet and complete.json; do not edit -->",
        _summary(run), "## The task and the token code", _task(run), "## How it was trained, and where it stopped",
        _training(run), "## Its losses", _losses(run), "## How to load it", _loading(run, exported),
        "## What it is for", _purpose(run)]) + "\n"


def _title(run: Run) -> str:
    d, m = run.config.data, run.config.model
    kind = "BERT" if m.arch == "bert" else "GPT-2 decoder"
    return f"a {kind} that completes {d.n_rows}×{d.n_cols} rank-{d.rank} matrices"


def _summary(run: Run) -> str:
    cfg, m = run.config, run.config.model
    body = (f"A post-LN BERT encoder ({m.layers} layers, hidden {m.hidden}, {m.heads} heads, feed-forward "
            f"{m.intermediate_size}, {parameter_count(m) / 1e6:.1f} M parameters) with a linear read-out on every "
            f"position, trained online to fill in the missing entries of low-rank matrices" if m.arch == "bert" else
            f"A GPT-2 decoder ({m.layers} layers, width {m.hidden}, {m.heads} heads, {parameter_count(m) / 1e6:.2f} M "
            f"parameters) that reads a masked matrix and writes the whole matrix, one entry a token (App. G)")
    return (f"{body}: run `{cfg.run_id}` of the `{cfg.name}` preset of `matcomp`, the library of this repository's "
            f"executable account of {PAPER}.")


def _task(run: Run) -> str:
    d, arch = run.config.data, run.config.model.arch
    tokens = BERT_TOKENS if arch == "bert" else GPT_TOKENS
    factors = {"uniform": f"uniform on [-{d.scale:g}, {d.scale:g}]", "gaussian": f"N(0, {d.scale:g}²)",
               "laplace": f"Laplace(0, {d.scale:g})"}[d.distribution]
    lines = [f"- **Matrices** X = U Vᵀ, {d.n_rows}×{d.n_cols}, rank {d.rank}, U and V with i.i.d. entries "
             f"{factors}, rounded to {DECIMALS} decimals; drawn fresh at every step (§2.1)"
             + (f"; sizes mixed per step: {list(d.sizes)}" if d.sizes else "") + ".",
             f"- **Missing entries**: each independently with probability {d.p_mask:g}.",
             f"- **Tokens**: the matrix row by row, {d.seq_len} tokens; a value x is token {tokens.zero_id} + "
             f"{STEPS_PER_UNIT}·x (x in [-{tokens.value_max:g}, {tokens.value_max:g}]: ids 1 to {tokens.max_id}), a "
             f"missing entry is {MASK_ID} (MASK)"
             + (f", [SEP] is {tokens.sep_id}" if tokens.sep_id is not None else "")
             + f"; vocabulary {tokens.vocab_size} (App. D)."]
    if arch == "bert":
        lines += ["- **Input**: those ids alone, positions 0, 1, … (no [CLS] or [SEP]; token types all 0). MASK is "
                  "BERT's padding id too: its embedding row is zero, so a missing entry enters as its position alone.",
                  "- **Output**: at every position, the read-out `Linear(hidden, 1)` of the last hidden state: the "
                  "model's value of that entry. Trained on the mean squared error over every entry, observed and "
                  "missing (L); L_obs and L_mask are the same error over the observed or the missing entries."]
    else:
        lines += [f"- **Sequence**: the masked matrix, [SEP], then the full matrix ({2 * d.seq_len + 1} tokens); "
                  "trained with cross-entropy on every next token; read greedily after [SEP]."]
    return "\n".join(lines)


def _training(run: Run) -> str:
    cfg, summary = run.config, run.summary
    t = cfg.train
    machine = summary.get("machine") or {}
    where = f"{summary.get('device', 'an unrecorded device')}" + (f" ({machine['gpu']})" if machine.get("gpu") else
                                                                   f" ({machine['cpu']})" if machine.get("cpu") else "")
    engine = f" by the {summary['engine']} engine" if summary.get("engine") else ""
    lines = [f"Adam at a constant learning rate {t.lr:g}, no warm-up or weight decay, {t.batch} fresh matrices a "
             f"step, {PRECISION[t.precision]}, seed {t.seed}, a budget of {t.steps:,} steps (§2.2; its whole "
             f"config: `config.json`).",
             f"Trained on {where}{engine}" + (f": {summary['train_s']:.0f} s of training, "
                                             f"{1000 * summary['train_s'] / run.last_step:.1f} ms a step." if
                                             "train_s" in summary else ".")]
    if summary.get("stopped"):
        lines.append(f"**It stopped before its budget**, {summary['stopped']}.")
    elif run.last_step < t.steps:
        lines.append(f"It stopped at step {run.last_step:,} of {t.steps:,}, {t.stop_after_drop:,} steps after its "
                     f"drop (`train.stop_after_drop`).")
    else:
        lines.append(f"It trained its whole budget, {t.steps:,} steps.")
    if summary.get("note"):
        lines.append(f"From its record: {summary['note']}.")
    lines.append(f"Made by: `{summary['command']}`." if summary.get("command") else "")
    return "\n".join(line for line in lines if line)


def _losses(run: Run) -> str:
    cfg, metrics = run.config, run.metrics
    names = metric_names(cfg.model)[:3] if cfg.model.arch == "bert" else metric_names(cfg.model)
    last = metrics.iloc[-1]
    evaluated = metrics.dropna(subset=[f"eval_{names[0]}"]).iloc[-1]
    final = final_losses(metrics)
    rows = [f"| | {' | '.join(names)} |", "|---|" + "---|" * len(names),
            f"| step {int(last.step):,}, its last (one training batch of {cfg.train.batch}) | "
            + " | ".join(f"{last[n]:.4g}" for n in names) + " |",
            f"| mean of its last {FINAL_STEPS} steps (the run's final losses) | "
            + " | ".join(f"{final[n]:.4g}" for n in names) + " |",
            f"| evaluation at step {int(evaluated.step):,} ({cfg.train.eval_batch} fresh matrices) | "
            + " | ".join(f"{evaluated['eval_' + n]:.4g}" for n in names) + " |"]
    if cfg.model.arch != "bert":
        return "\n".join(rows) + ("\n\nThe accuracies of the evaluation row are those of greedy decoding; the "
                                  "training rows' are teacher-forced. Every step's losses: `metrics.parquet`.")
    drop, level = _drop(run), second_moment(cfg.data)
    if drop is None:
        return "\n".join(rows) + "\n\nToo short to read a plateau from. Every step's losses: `metrics.parquet`."
    copying = (f"E[X²] = {cfg.data.rank} · ({FACTOR_VARIANCE[cfg.data.distribution] * cfg.data.scale ** 2:.4g})² = "
               f"{level:.4f}, what answering 0 at every missing entry scores")
    if drop.dropped:
        tenfold = (f"below a tenth of it from step {drop.tenfold_step:,}" if drop.tenfold_step is not None else
                   f"not below a tenth of it by step {run.last_step:,}")
        fell = (f"it fell below half of it at step {drop.half_step:,} (its drop: the sudden fall of §3, Fig. 2), "
                f"{tenfold}, and ends **{drop.factor:.2f}× below its plateau** (L_mask {drop.final:.4f}, the mean "
                f"of its last {FINAL_STEPS} steps)")
    else:
        fell = f"it had not fallen below half of it by step {run.last_step:,}"
    return ("\n".join(rows) + f"\n\nL_mask sat on a plateau at {drop.plateau:.4f} (the copying level: {copying}); "
            f"{fell}. Every step's losses: `metrics.parquet`.")


def _drop(run: Run) -> Drop | None:
    """The run's plateau and drop (``matcomp.drop``), or None: a GPT run has none, and a run too short no plateau."""
    if run.config.model.arch != "bert":
        return None
    try:
        return run.drop
    except ValueError:
        return None


def _checkpoints(run: Run) -> str:
    """The shipped checkpoints, each said to be before or after the drop, and their dtype."""
    drop = _drop(run)
    half = drop.half_step if drop is not None else None
    said = [f"{s:,}" + ("" if half is None else " (on the plateau, before its drop)" if s < half else
                        " (after its drop)") for s in run.steps]
    dtype = run.summary.get("checkpoint_dtype", "float32")
    rounded = (", the float32 weights training ended with rounded when the run was brought home (the library "
               "loads them into a float32 model)" if dtype != "float32" else "")
    return f"Its checkpoints shipped: steps {', '.join(said)}; stored in {dtype}{rounded}."


def _loading(run: Run, exported: tuple[int, str, str] | None) -> str:
    cfg = run.config
    if not run.steps:
        trained = run.summary.get("command", "").split(" && ")[0] or f"python -m matcomp train --preset {cfg.name}"
        return ("No checkpoint is shipped with this run: its record (config, metrics) alone. Its metrics: "
                f"`pandas.read_parquet(\"metrics.parquet\")`; its model, trained again: `{trained}`.")
    if exported is not None:
        step, folder, dtype = exported
        head = (f"This folder holds step {step:,} of run `{cfg.run_id}`, its tensors in {dtype}, exactly those of "
                f"the checkpoint (`config.json`'s `matcomp` says which, with the run's config and the token code).")
    else:
        folder = export_folder(run)
        head = (f"{_checkpoints(run)} Export one (the last by default; `--step STEP` another) to a folder plain "
                f"`transformers` loads:\n\n```bash\npython -m matcomp export {cfg.run_id} --out {folder}\n```")
    how = ("`BertModel` with `add_pooling_layer=False` (the model has no pooler) loads `model.safetensors` with "
           "no key missing or unexpected; `readout.safetensors` holds the read-out" if cfg.model.arch == "bert" else
           "`GPT2LMHeadModel` loads `model.safetensors` with no key missing or unexpected (its read-out is its "
           "`lm_head`)")
    return (f"{head}\n\n{how}; `dtype=torch.float32` computes as the library does. Complete a batch of the task's "
            f"matrices:\n\n```python\n{loading_snippet(run, folder)}```")


def loading_snippet(run: Run, folder: str) -> str:
    """Python that loads an export of ``run`` from ``folder`` with plain ``transformers``, draws a batch of the
    run's task, tokenises it, completes it and prints the missing entries' MSE against answering 0; it leaves
    ``ids``, ``X``, ``observed`` and ``predicted`` defined (the README's snippet, run by the tests)."""
    d, arch = run.config.data, run.config.model.arch
    tokens = BERT_TOKENS if arch == "bert" else GPT_TOKENS
    b, m, n, r = SNIPPET_BATCH, d.n_rows, d.n_cols, d.rank
    scale = "" if d.scale == 1 else f" * {d.scale:g}"
    draw = {"uniform": "2 * torch.rand({}) - 1" if d.scale == 1 else "(2 * torch.rand({}) - 1)" + scale,
            "gaussian": "torch.randn({})" + scale,
            "laplace": f"torch.distributions.Laplace(0.0, {d.scale:g}).sample(({{}}))"}[d.distribution]
    clamp = f".clamp({-tokens.value_max:g}, {tokens.value_max:g})" if d.clamp else ""
    code = "\n".join(["import torch"] + (["from safetensors.torch import load_file"] if arch == "bert" else []) + [
        f"from transformers import {'BertModel' if arch == 'bert' else 'GPT2LMHeadModel'}",
        "",
        f'folder = "{folder}"  # python -m matcomp export {run.config.run_id} --out {folder}']
        + (["bert = BertModel.from_pretrained(folder, add_pooling_layer=False, dtype=torch.float32).eval()",
            "readout = torch.nn.Linear(bert.config.hidden_size, 1)",
            'readout.load_state_dict(load_file(f"{folder}/readout.safetensors"))'] if arch == "bert" else
           ["gpt = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32).eval()"]) + [
        "",
        "torch.manual_seed(0)",
        f"U, V = {draw.format(f'{b}, {m}, {r}')}, {draw.format(f'{b}, {n}, {r}')}  # the task's factors",
        f"X = (U @ V.transpose(1, 2)){clamp}.round(decimals={DECIMALS})  # {b} matrices {m}×{n} of rank {r}",
        f"observed = torch.rand({b}, {m}, {n}) > {d.p_mask:g}  # each entry missing with probability {d.p_mask:g}",
        f"ids = torch.where(observed, {tokens.zero_id} + ({STEPS_PER_UNIT} * X).round().long(), {MASK_ID})"
        f".flatten(1)  # row by row; MASK = {MASK_ID}"]
        + (["with torch.no_grad():",
            "    predicted = readout(bert(input_ids=ids).last_hidden_state).squeeze(-1).view_as(X)"] if arch == "bert"
           else [f"seq = torch.cat([ids, torch.full(({b}, 1), {tokens.sep_id})], dim=1)  # then [SEP]",
                 "with torch.no_grad():  # greedy: the model writes the full matrix, one entry a token",
                 f"    for _ in range({m * n}):",
                 "        seq = torch.cat([seq, gpt(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)], dim=1)",
                 f"predicted = ((seq[:, {m * n + 1}:] - {tokens.zero_id}) / {STEPS_PER_UNIT}).view_as(X)"]) + [
        "missing = ~observed",
        'print(f"missing entries: MSE {((predicted - X)[missing] ** 2).mean():.4f}, '
        'answering 0: {(X[missing] ** 2).mean():.4f}")'])
    return code + "\n"


def _purpose(run: Run) -> str:
    cfg = run.config
    use = ("the model before its drop copies its input and answers about 0 at a missing entry; after it, it "
           "completes the matrix (§3)" if cfg.model.arch == "bert" else
           "App. G's autoregressive counterpart of the paper's BERT")
    shipped = ("This repository's book reads its record (its losses step by step); its weights are not shipped."
               if not run.steps else "It is a model this repository's book analyses, shipped so that others can "
               "study it with their own tools." if run.path.parent.resolve() == REFERENCE_ROOT.resolve() else
               "It was trained by this repository's library; the book ships the runs it analyses in runs/reference.")
    return (f"Research on abrupt learning in transformers, as in {PAPER}: {use}. {shipped} It "
            f"knows one task: {cfg.data.n_rows}×{cfg.data.n_cols} matrices of rank {cfg.data.rank} with entries like "
            f"its training's, tokenised as above; it was trained on no other size, rank, value range or token, and "
            f"it is not a language model.")
