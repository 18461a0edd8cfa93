"""Shortening the plateau (beyond the paper): the changes compared with plain training, and the
comparison of their drop steps over seeds."""

from __future__ import annotations

import pandas as pd

from matcomp.analysis.seeds import censored
from matcomp.config import RunConfig
from matcomp.drop import final_losses
from matcomp.runs.run import Run

BIAS = 2.0  # the attention bias added to same-row and same-column scores
SCALE = 10.0  # the follow-up's factor on the attention to the target positions (att_scale_c)


# the arms' names, as their tables and the chapter's prose read them
SCALED, LR = "attention × 10 (follow-up)", "lr × 2"
FADING, FADING_NO_DIAGONAL = "bias, fading", "bias, fading, no diagonal"
KEPT_ON, KEPT_ON_NO_DIAGONAL = "bias, kept on", "bias, kept on, no diagonal"
STAYS = (SCALED, KEPT_ON, KEPT_ON_NO_DIAGONAL)  # the arms whose change lasts to the end of training


def shortening_defaults(cfg: RunConfig, after_drop: int) -> dict[str, dict]:
    """The changes the shortening chapter compares with plain training, as overrides of ``cfg``
    (S steps), each run to the same S steps as plain training and ended ``after_drop`` steps past its
    drop, so that no arm is cut short:

    - the follow-up's intervention (Gopalani & Hu 2025): attention probabilities of the same-row and
      same-column pairs multiplied by 10 from step S/40 to the end (500 on the cpu preset), the
      diagonal left alone, since attending to itself is what copying does;
    - our attention bias of 2 on those scores, fading to 0 over S/5 steps or kept on, each with and
      without the diagonal (a position's score on itself, which also favours copying);
    - twice the learning rate, the control that points attention nowhere."""
    steps = cfg.train.steps
    full = {"train.stop_after_drop": after_drop}
    no_diagonal = {"train.attention_diagonal": False}
    fading = full | {"train.attention_bias": BIAS, "train.attention_bias_steps": max(steps // 5, 1)}
    kept_on = full | {"train.attention_bias": BIAS, "train.attention_bias_schedule": "constant"}
    scaled = full | no_diagonal | {"train.attention_scale": SCALE, "train.attention_scale_from": max(steps // 40, 1)}
    return {SCALED: scaled,
            FADING: fading, FADING_NO_DIAGONAL: fading | no_diagonal,
            KEPT_ON: kept_on, KEPT_ON_NO_DIAGONAL: kept_on | no_diagonal,
            LR: full | {"train.lr": 2 * cfg.train.lr}}


def arm_summary(plain: pd.DataFrame, arms: dict[str, pd.DataFrame], budget: int) -> pd.DataFrame:
    """One row per arm, plain training first (tables of ``drop_over_seeds`` on the same seeds, all
    trained up to ``budget`` steps): how many seeds drop within the budget; the mean, sd, min and max
    drop step of those; on how many seeds the arm drops earlier than plain training (a seed where only
    plain training drops counts as later, one where neither does as neither); the mean change over
    the seeds where both drop (``both dropped``: how many); and the outcome: "earlier on every seed", "later
    on every seed", "no seed tells them apart" (neither drops, or both at the same step) or "earlier on e, later
    on l of n seeds" (all n seeds one way is the strongest a sign test can see: p = 2/2ⁿ two-sided,
    1/8 for four); plain training's own row says it is the reference ("—", "the reference of the others"), not
    a missing value. Not the book's verdict categories, which judge a number against the paper's."""
    rows = {}
    plain_steps = plain["drop step"].astype("Float64")
    for name, table in ({"plain": plain} | arms).items():
        steps = table["drop step"].astype("Float64")
        dropped = steps.dropna().astype(float)
        base = plain_steps.reindex(steps.index)
        mine, theirs = censored(steps, budget), censored(base, budget)  # no drop: later than any within the budget
        earlier, later = int((mine < theirs).sum()), int((mine > theirs).sum())
        both = (steps - base).dropna().astype(float)
        row = {"dropped": f"{len(dropped)}/{len(steps)}", "mean": dropped.mean(), "sd": dropped.std(),
               "min": dropped.min(), "max": dropped.max()}
        if name == "plain":  # the row every other arm is compared with: it has no comparison of its own
            row |= {"earlier than plain": "—", "mean change": float("nan"), "both dropped": float("nan"),
                    "outcome": "the reference of the others"}
        else:
            outcome = ("earlier on every seed" if earlier == len(steps) else
                       "later on every seed" if later == len(steps) else
                       "no seed tells them apart" if earlier + later == 0 else
                       f"earlier on {earlier}, later on {later} of {len(steps)} seeds")
            row |= {"earlier than plain": f"{earlier}/{len(steps)}", "mean change": both.mean(),
                    "both dropped": len(both), "outcome": outcome}
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("arm")


def seed_curves(plain: dict[int, Run], changed: dict[str, dict[int, Run]]) -> tuple[dict[int, dict[str, pd.DataFrame]],
                                                                                     dict[int, float]]:
    """For each seed of ``plain`` (seed -> run), the metrics of plain training (cut at the longest changed
    run's budget, named "plain") and of every changed arm's run at that seed (``changed``: name -> seed ->
    run), and plain training's plateau at that seed: what the shortening chapter plots seed by seed."""
    end = max(run.config.train.steps for runs in changed.values() for run in runs.values())
    curves, levels = {}, {}
    for seed, base in plain.items():
        curves[seed] = {"plain": base.metrics[base.metrics.step <= end]}
        curves[seed] |= {name: runs[seed].metrics for name, runs in changed.items()}
        levels[seed] = base.drop.plateau
    return curves, levels


def with_and_without(arms: dict[str, dict[int, Run]], steps: int = 1000) -> pd.DataFrame:
    """Per arm (rows: name -> seed -> run) and seed: L_mask over the last ``steps`` steps of its run on
    the training batches, where the change acts, and on the evaluation batches, which read the same
    weights without it (``matcomp.runs.training``). A kept-on change whose model completes only with the
    change in place shows as a gap between the two."""
    rows = {}
    for name, runs in arms.items():
        for seed, run in runs.items():
            end = final_losses(run.metrics, steps)
            rows[(name, seed)] = {"L_mask with the change": end["L_mask"], "L_mask without it": end["eval_L_mask"]}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["arm", "seed"])


def bias_ends(changed: dict[str, RunConfig]) -> dict[str, int]:
    """The step where each changed run's attention bias reaches 0 (runs without a fading bias left out)."""
    return {name: c.train.attention_bias_steps for name, c in changed.items()
            if c.train.attention_bias and c.train.attention_bias_schedule == "fade"}
