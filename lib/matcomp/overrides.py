"""Config changes as a user types them: ``FIELD=VALUE`` pairs (``--set``, ``$MATCOMP_SET``, a chapter's
``overrides``) and their values, parsed in one place so that every entry point reads them alike."""

from __future__ import annotations

import json
import re


def parse_value(text: str):
    """A value typed on a command line or in a parameter string: a JSON literal (3, 1e-3, null, true,
    [1, 2]) where it is one, else the string itself.

    >>> parse_value("1e-3"), parse_value("cpu")
    (0.001, 'cpu')
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_assignment(item: str, form: str = "FIELD=VALUE", example: str = "train.lr=3e-4") -> tuple[str, str]:
    """``"train.lr=3e-4"`` -> ``("train.lr", "3e-4")``; ValueError naming ``form`` otherwise.

    >>> parse_assignment("data.p_mask = 0.2")
    ('data.p_mask', '0.2')
    """
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected {form} (e.g. {example}); got {item!r}")
    return key.strip(), value.strip()


def parse_overrides(text: str) -> dict[str, str]:
    """``"train.lr=3e-4, model.hidden=32"`` -> ``{"train.lr": "3e-4", "model.hidden": "32"}``: the
    one parser of override strings (chapters' parameters, ``$MATCOMP_SET``); a comma starts a new
    pair only before ``FIELD=``, so list values keep theirs.

    >>> parse_overrides("train.lr=3e-4, data.p_mask=0.2")
    {'train.lr': '3e-4', 'data.p_mask': '0.2'}
    >>> parse_overrides("data.sizes=[3, 4], data.rank=1")
    {'data.sizes': '[3, 4]', 'data.rank': '1'}
    """
    items = filter(None, (part.strip() for part in re.split(r",(?=\s*[\w.]+\s*=)", text)))
    return once_each([parse_assignment(item, "comma-separated FIELD=VALUE pairs") for item in items])


def once_each(pairs: list[tuple[str, str]], option: str = "") -> dict[str, str]:
    """``pairs`` as a dict; a name given twice is a ValueError (which value is meant cannot be guessed), naming
    ``option`` where the pairs came from one.

    >>> once_each([("model.layers", "2"), ("model.layers", "3")])
    Traceback (most recent call last):
    ValueError: model.layers is given 2 times (2, 3); give each once
    """
    names = [name for name, _ in pairs]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        values = ", ".join(value for name, value in pairs if name == twice[0])
        given = f"{option} gives {twice[0]}" if option else f"{twice[0]} is given"
        raise ValueError(f"{given} {names.count(twice[0])} times ({values}); give each once")
    return dict(pairs)
