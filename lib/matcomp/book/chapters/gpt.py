"""The GPT chapter (NeurIPS App. F): a decoder trained on the task as a sequence, its curves, attention and
greedy completions beside the BERT's; and the numbers its prose quotes of the default preset's run."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from matcomp.analysis.gpt import (
    Completion,
    completion_table,
    copy_onset,
    greedy_reading,
    late_gain,
)
from matcomp.analysis.seeds import trained_on
from matcomp.book.chapter import chapter_config, open_run
from matcomp.book.parameters import COUNT, STEP, parameter
from matcomp.book.spec import ChapterSpec, RunParameters
from matcomp.book.tables import at_step, span_text
from matcomp.config import RunConfig
from matcomp.data import sample_batch
from matcomp.drop import FINAL_STEPS, final_losses
from matcomp.presets import DEFAULT_PRESET, preset_config
from matcomp.runs.cost import duration
from matcomp.runs.run import Run
from matcomp.seeding import analysis_generator


@dataclass(frozen=True)
class Parameters(RunParameters):
    """The parameters of the chapter's notebook (its ``parameters`` cell says what each does)."""

    samples: int = parameter(256, COUNT)  # matrices for the attention maps and the comparison with BERT
    # checkpoint step on the plateau for the attention maps; None: half the copying step
    before: int | None = parameter(None, STEP)
    after: int | None = parameter(None, STEP)  # checkpoint step after the drop; None: twice the copying step


def map_steps(run: Run, onset: int | None, before: int | None, after: int | None) -> tuple[int, int]:
    """The checkpoints of the attention maps: ``before`` on the plateau and ``after`` the copy is learnt (None: half
    and twice the copying step ``onset``), each the nearest checkpoint. A step past the run's last checkpoint, or a
    ``before`` that is not before ``after``, is refused by name: the maps and the findings would read them
    swapped."""
    last = run.steps[-1]
    for name, step in (("before", before), ("after", after)):
        if step is not None and step > last:
            raise ValueError(f"the gpt chapter's parameter {name} = {step:,} is past the run's last checkpoint "
                             f"(step {last:,}); give a step from 0 to {last:,}")
    steps = onset or run.config.train.steps
    first = run.nearest_step(before if before is not None else steps // 2)
    second = run.nearest_step(after if after is not None else min(2 * steps, run.config.train.steps))
    if first >= second and (before, after) != (None, None):  # a run too short for both defaults keeps them as they fall
        raise ValueError(f"the gpt chapter's parameter before (checkpoint {first:,}) must come before after "
                         f"(checkpoint {second:,}): the maps on the plateau and after the copy would be swapped")
    return first, second


def quoted_configs() -> list[RunConfig]:
    """The default preset's GPT run and the BERT run it is set beside: what the prose quotes at every preset."""
    return [preset_config(name) for name in (f"{DEFAULT_PRESET}_gpt", DEFAULT_PRESET)]


def default_gpt(samples: int) -> tuple[Run, dict[str, float], Completion]:
    """The default preset's GPT run, the ``greedy_reading`` of its last checkpoint and its ``completion_table``
    beside the default BERT (``quoted_configs``), on ``samples`` matrices drawn as the gpt chapter draws them."""
    gpt, bert = (open_run(cfg) for cfg in quoted_configs())
    batch = sample_batch(gpt.config.data, samples, analysis_generator(gpt.config.train.seed))
    return gpt, greedy_reading(gpt.gpt(gpt.steps[-1]), batch), completion_table(gpt, bert, batch)


def gpt_run_numbers(run: Run) -> dict[str, str]:
    """How long a run trained and where (keys ``gpt_time``, ``gpt_machine``), from its ``complete.json``."""
    return {"gpt_time": duration(run.summary.get("train_s", float("nan"))), "gpt_machine": trained_on(run.summary)}


def gpt_numbers(metrics: pd.DataFrame, reading: dict[str, float], completion: Completion,
                marks=(0.15, 0.45)) -> dict[str, str]:
    """What the gpt chapter's closing prose quotes (keys ``gpt_*``): the greedy accuracy at missing entries
    (a mean over a fortieth of the run) at the fractions ``marks`` of the run and over its last quarter, with
    ``late_gain``'s verdict, and at its end (``drop.final_losses``); the greedy reading of the missing entries
    (``sign_and_magnitude``); and the
    completion table of the chapter (GPT greedy and softmax-mean rows first, then BERT's, then answering 0)."""
    evals = metrics.dropna(subset=["eval_acc_mask"]).set_index("step")["eval_acc_mask"]
    last = int(evals.index.max())
    gain = late_gain(metrics)
    late = evals[evals.index > last - gain["window"]].rolling(20, min_periods=1).mean()

    steps = [int(evals.index[abs(evals.index - mark * last).argmin()]) for mark in marks]
    accuracy = [evals[abs(evals.index - step) <= last / 80].mean() for step in steps]  # ±250 steps at 20,000

    L_mask = completion.table["L_mask"]
    bert, zero = L_mask[list(completion.bert.values())].min(), L_mask[completion.zero]
    greedy = L_mask[completion.greedy]
    return {
        "gpt_steps": f"{last:,}", "gpt_mark_1": f"{steps[0]:,}", "gpt_mark_2": f"{steps[1]:,}",
        "gpt_acc_1": f"{accuracy[0]:.2f}", "gpt_acc_2": f"{accuracy[1]:.2f}",
        "gpt_acc_late": span_text(late, "{:.2f}"), "gpt_late_window": f"{gain['window']:,.0f}",
        "gpt_late_gain": f"{gain['gain']:+.3f} ± {gain['se']:.3f}", "gpt_late_flat": "flat" if gain["flat"] else
        "still moving",
        "gpt_acc_mask": f"{final_losses(metrics)['eval_acc_mask']:.2f}", "gpt_greedy": f"{greedy:.3f}",
        "gpt_greedy_ratio": f"{greedy / zero:.1f}", "gpt_mean": f"{L_mask[completion.means]:.3f}",
        "gpt_zero": f"{zero:.3f}", "gpt_bert": f"{bert:.3g}", "gpt_bert_ratio": f"{zero / bert:.1f}",
        "gpt_sign": f"{reading['sign right']:.2f}", "gpt_abs": f"{reading['|x| MSE']:.3f}",
        "gpt_abs_const": f"{reading['|x| MSE of E|x|']:.3f}", "gpt_random_sign": f"{reading['MSE, random sign']:.3f}",
        "gpt_reading_mse": f"{reading['MSE']:.3f}",
    }


def runs_read(preset: str) -> list[RunConfig]:
    """The GPT run of the scale, then the BERT run it is set beside."""
    return [chapter_config(preset, variant="gpt"), chapter_config(preset)]


def run_values(run: Run, onset: int | None, scores: pd.DataFrame, before: int, after: int, gains: pd.DataFrame,
               completion: Completion) -> dict[str, str]:
    """What the chapter's sentences on its run quote (keys ``gr_*``): greedy accuracy from the first evaluation to
    the last (``onset``: where it copies), the layer-1 heads' attention to the matching input entry at the
    checkpoints ``after`` and ``before`` (``attention_scores`` by checkpoint), whether accuracy and loss have
    flattened (``late_gain`` by measure), and the completions' L_mask (``completion_table``)."""
    evals = run.metrics.dropna(subset=["eval_acc_obs"])
    final = final_losses(run.metrics)
    entry, last_input = scores["to_entry"], scores.loc[f"step {before}", "to_last_input"]

    def moved(measure: str) -> str:
        row = gains.loc[measure]
        return f"{row['gain']:+.3f} ± {row['se']:.3f} ({'flat' if row['flat'] else 'still moving'})"

    L_mask = completion.table["L_mask"]
    listed = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
    return {
        "gr_run": run.config.run_id, "gr_obs_first": f"{evals.eval_acc_obs.iloc[0]:.2f}",
        "gr_first_step": f"{evals.step.iloc[0]:,}", "gr_half": at_step(onset),
        "gr_most": at_step(copy_onset(run.metrics, 0.9)), "gr_obs_final": f"{final.eval_acc_obs:.2f}",
        "gr_final_steps": str(FINAL_STEPS), "gr_mask_first": f"{evals.eval_acc_mask.iloc[0]:.2f}",
        "gr_mask_final": f"{final.eval_acc_mask:.2f}",
        "gr_after": f"{after:,}", "gr_before": f"{before:,}", "gr_entry_after": listed(entry[f"step {after}", 1]),
        "gr_entry_before": listed(entry[f"step {before}", 1]), "gr_rest_head": str(last_input.idxmax()[1]),
        "gr_rest_layer": str(last_input.idxmax()[0]), "gr_rest": f"{last_input.max():.2f}",
        "gr_window": f"{int(gains.window.iloc[0]):,}", "gr_acc_moved": moved("eval_acc_mask"),
        "gr_loss_moved": moved("L_full"),
        "gr_greedy": f"{L_mask[completion.greedy]:.3g}", "gr_means": f"{L_mask[completion.means]:.3g}",
        "gr_zero": f"{L_mask[completion.zero]:.3g}",
        "gr_bert": ", ".join(f"{L_mask[row]:.3g} {name}" for name, row in completion.bert.items()),
    }


CHAPTER = ChapterSpec("gpt", Parameters, runs_read, quoted=quoted_configs)
