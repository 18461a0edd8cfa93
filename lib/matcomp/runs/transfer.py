"""Bringing a run home from a machine lent for minutes, whose files come back a few at a time and at
most ``PART_BYTES`` each: the run's **record** (config, metrics, summary) and its
**checkpoints**, each packed into parts with their SHA-256, and their verified install into the shipped
store.

One packed item is ``<run_id>.<item>.json`` (its manifest: the run, the item, the whole item's size and
SHA-256, and every part's name, size and SHA-256) and its parts ``<run_id>.<item>.partNN``. The item
``record`` is a tar of the run's ``config.json``, ``metrics.parquet``, ``summary.json`` (its ``complete.json``
less the file list, plus ``checkpoint_sha256``: the SHA-256 of every checkpoint file the run holds); the item
``step_NNNNNN`` is the bytes of one checkpoint file,
which may come from another command than the record's. ``unpack`` checks every part and every whole before
it writes anything, and every checkpoint against the SHA-256 the record holds for it (one from another
training of the same run id is refused), then installs the run as a shipped folder sealed by its own
``complete.json``. Its derived tables are computed at home from the installed weights (``python -m matcomp
derive``), not on the lent machine.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from matcomp.runs.folder import CHECKPOINT_PATTERN, METRICS, RunFolder, atomic_write_bytes, metrics_bytes
from matcomp.runs.run import Run, verify
from matcomp.runs.store import writable_store

PART_BYTES = 15 * 2**20  # under the 16 MiB that one file brought back from a lent GPU machine may weigh
RECORD = "record"
RECORD_FILES = ("config.json", METRICS, "summary.json")
UNSEALED = ("files", "sha256")  # what complete.json records of its own folder's files; the install seals anew
MANIFEST = re.compile(r"(?P<run>.+)\.(?P<item>record|step_\d{6})\.json")  # a packed item's manifest, by its name


class TransferError(ValueError):
    """A packed item that cannot be trusted or installed: a part missing, of the wrong size or bytes."""


@dataclass(frozen=True)
class Installed:
    """What ``unpack`` installed: the run, the checkpoints its record lists that did not come back (their
    commands were not run, or their files were lost), and the manifests of other runs' items in the folders,
    left as they are."""

    run: Run
    missing_steps: tuple[int, ...]
    skipped: tuple[Path, ...] = ()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checkpoint_item(step: int) -> str:
    """The item name of the checkpoint at ``step``: its file's stem, e.g. ``step_004000``."""
    return CHECKPOINT_PATTERN.format(step).split(".")[0]


def pack_bytes(data: bytes, run_id: str, item: str, out: Path, part_bytes: int = PART_BYTES,
               about: dict | None = None) -> list[Path]:
    """Write ``data`` as item ``item`` of run ``run_id`` into ``out``: its parts of at most ``part_bytes``,
    then its manifest (with ``about``, what the item is); returns the files written."""
    if not isinstance(part_bytes, int) or part_bytes < 1:
        raise ValueError(f"part_bytes must be an integer >= 1; got {part_bytes!r}")
    out = Path(out)
    stem = f"{run_id}.{item}"
    chunks = [data[i:i + part_bytes] for i in range(0, len(data), part_bytes)] or [b""]
    if len(chunks) > 99:
        raise ValueError(f"{stem} would need {len(chunks)} parts of {part_bytes} bytes; at most 99")
    parts, paths = [], []
    for i, chunk in enumerate(chunks):
        path = out / f"{stem}.part{i:02d}"
        atomic_write_bytes(path, chunk)
        parts.append({"file": path.name, "bytes": len(chunk), "sha256": _sha256(chunk)})
        paths.append(path)
    manifest = {"run": run_id, "item": item, "bytes": len(data), "sha256": _sha256(data), "parts": parts,
                **(about or {})}
    atomic_write_bytes(out / f"{stem}.json", json.dumps(manifest, indent=1).encode())
    return [*paths, out / f"{stem}.json"]


def pack_record(run: Run, out: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """Pack ``run``'s record (config, metrics, summary) into ``out``."""
    buffer = io.BytesIO()
    summary = {k: v for k, v in run.summary.items() if k not in UNSEALED}
    summary["checkpoint_sha256"] = {str(step): run.summary["sha256"][checkpoint_name(run, step)] for step in run.steps}
    members = {"config.json": run.folder.config_path.read_bytes(), METRICS: metrics_bytes(run.metrics),
               "summary.json": json.dumps(summary, indent=2).encode()}
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed, tarfile.open(fileobj=packed, mode="w") as tar:
        for name, data in members.items():  # no dates: the same record packs to the same bytes
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return pack_bytes(buffer.getvalue(), run.config.run_id, RECORD, out, part_bytes,
                      {"checkpoints": run.steps})


def checkpoint_name(run: Run, step: int) -> str:
    """The checkpoint file of ``run`` at ``step`` as its seal names it (``checkpoints/step_NNNNNN.safetensors``)."""
    return run.folder.checkpoint_path(step).relative_to(run.path).as_posix()


def pack_checkpoint(run: Run, step: int, out: Path, part_bytes: int = PART_BYTES,
                    about: dict | None = None) -> list[Path]:
    """Pack the checkpoint file of ``run`` at ``step`` (as stored: a bf16 copy stays bf16) into ``out``, its
    manifest holding ``about`` too (how it was made)."""
    data = run.folder.existing_checkpoint(step).read_bytes()
    return pack_bytes(data, run.config.run_id, checkpoint_item(step), out, part_bytes, {**(about or {}), "step": step})


def manifest_problem(manifest, run: str, item: str) -> str | None:
    """Why ``manifest`` (read from the file named for item ``item`` of run ``run``) is not a whole manifest of it,
    or None: every field ``pack_bytes`` writes, of its type, and the list of checkpoints of a record or the step
    of a checkpoint."""
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__}, not an object"
    if (manifest.get("run"), manifest.get("item")) != (run, item):
        return f"it names item {manifest.get('item')!r} of run {manifest.get('run')!r}, not its file's"
    fields = {"bytes": int, "sha256": str, "parts": list, **({"checkpoints": list} if item == RECORD else
                                                              {"step": int})}
    wrong = [name for name, kind in fields.items() if not isinstance(manifest.get(name), kind)]
    if wrong:
        return f"its {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} missing or not of its kind"
    part_fields = {"file": str, "bytes": int, "sha256": str}
    if not manifest["parts"] or not all(isinstance(part, dict) and all(isinstance(part.get(k), kind)
                                                                     for k, kind in part_fields.items())
                                        for part in manifest["parts"]):
        return "its parts are not a list of file, bytes and sha256"
    if item == RECORD and not all(isinstance(step, int) for step in manifest["checkpoints"]):
        return "its checkpoints are not a list of steps"
    if item != RECORD and checkpoint_item(manifest["step"]) != item:
        return f"its step {manifest['step']} is not its item's"
    return None


def _manifests(folders: list[Path]) -> dict[tuple[str, str], dict]:
    """Every item's manifest found in ``folders`` (a file named ``<run>.<item>.json``), by (run, item), each
    checked whole (``manifest_problem``: a truncated or edited one is a ``TransferError`` naming it, never passed
    over); one item in two folders must agree."""
    found: dict[tuple[str, str], dict] = {}
    for folder in folders:
        if not Path(folder).is_dir():
            raise TransferError(f"{folder} is not a folder of packed files")
        for path in sorted(Path(folder).glob("*.json")):
            named = MANIFEST.fullmatch(path.name)
            if named is None:
                continue  # not a packed item's manifest (a log, a notebook's output)
            key = (named["run"], named["item"])
            try:
                manifest = json.loads(path.read_bytes())
            except ValueError as err:  # not JSON, or cut short
                raise TransferError(f"{path} is a damaged manifest: not valid JSON ({err}); copy it again from "
                                    f"where it was packed") from None
            problem = manifest_problem(manifest, *key)
            if problem is not None:
                raise TransferError(f"{path} is a damaged manifest: {problem}; copy it again from where it was packed")
            manifest["path"] = str(path)
            if key in found and found[key]["sha256"] != manifest["sha256"]:
                raise TransferError(f"two manifests of {key[0]}.{key[1]} disagree: {found[key]['path']} and {path}")
            found[key] = manifest
    return found


def read_item(manifest: dict, folders: list[Path]) -> bytes:
    """The whole item ``manifest`` describes, from its parts in any of ``folders``, every part and the
    whole checked against their recorded size and SHA-256 (``TransferError`` naming the first that fails)."""
    data = []
    for part in manifest["parts"]:
        path = next((Path(f) / part["file"] for f in folders if (Path(f) / part["file"]).exists()), None)
        if path is None:
            raise TransferError(f"part {part['file']} is missing from {', '.join(map(str, folders))}")
        chunk = path.read_bytes()
        if len(chunk) != part["bytes"] or _sha256(chunk) != part["sha256"]:
            raise TransferError(f"part {path} is damaged: its size or SHA-256 differs from its manifest's")
        data.append(chunk)
    whole = b"".join(data)
    if len(whole) != manifest["bytes"] or _sha256(whole) != manifest["sha256"]:
        raise TransferError(f"{manifest['run']}.{manifest['item']} does not reassemble to its recorded SHA-256")
    return whole


def _record(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    bad = [name for name in members if name not in RECORD_FILES]
    missing = [name for name in RECORD_FILES if name not in members]
    if bad or missing:
        raise TransferError(f"a record holds {sorted(members)}: unexpected {bad}, missing {missing}")
    try:
        summary = json.loads(members["summary.json"])
    except ValueError:
        summary = None
    if not isinstance(summary, dict) or not isinstance(summary.get("checkpoint_sha256", {}), dict):
        raise TransferError("a record's summary.json is not a run's summary (a JSON object with the SHA-256 of its "
                            "checkpoints by step)")
    return members


def unpack(folders: list[Path] | Path, root: Path, run_id: str | None = None) -> Installed:
    """Verify and install the run packed in ``folders`` (those of several commands together) into the
    shipped store ``root``: its folder ``root/<run_id>`` with every checkpoint that came back, sealed by a
    new ``complete.json``. ``run_id`` picks one run where
    several are packed; the items of other runs are left, and named (``Installed.skipped``). Nothing is written
    until every item is checked; a run already installed is an error (remove it first to install again)."""
    given = [folders] if isinstance(folders, (str, Path)) else list(folders)
    if any(not str(folder).strip() for folder in given):  # Path("") is the current folder: never meant
        raise TransferError("a folder of packed files is empty (''): name the folders the files came back into")
    folders = [Path(folder) for folder in given]
    try:
        writable_store(root, "the store to install into")  # named before any part is read: a file, '', unwritable
    except ValueError as err:
        raise TransferError(str(err)) from None
    manifests = _manifests(folders)
    runs = sorted({run for run, item in manifests if item == RECORD})
    if run_id is not None and run_id not in runs:
        raise TransferError(f"no record of run {run_id!r} in {', '.join(map(str, folders))}; the records there: "
                            f"{runs or 'none'}")
    if run_id is not None:
        runs = [run_id]
    if len(runs) != 1:
        raise TransferError(f"expected the record of one run in {', '.join(map(str, folders))}; found "
                            f"{runs or 'none'}" + (" (name one with run_id)" if len(runs) > 1 else ""))
    run_id = runs[0]
    record = manifests[(run_id, RECORD)]
    members = _record(read_item(record, folders))
    packed = {m["step"]: m for (run, item), m in manifests.items() if run == run_id and item != RECORD}
    extra = sorted(set(packed) - set(record["checkpoints"]))
    if extra:
        raise TransferError(f"checkpoints {extra} came back but {run_id}'s record does not list them")
    expected = json.loads(members["summary.json"]).get("checkpoint_sha256", {})
    checkpoints = {}
    for step, manifest in sorted(packed.items()):
        checkpoints[step] = read_item(manifest, folders)  # its bytes are its manifest's SHA-256, or it raises
        if manifest["sha256"] != expected.get(str(step)):
            raise TransferError(f"checkpoint {step} of {run_id} is not the one its record holds (its SHA-256 "
                                f"{manifest['sha256'][:12]}…, the record's {str(expected.get(str(step)))[:12]}…): "
                                f"it came from another training of the run; nothing was installed")

    root = Path(root)
    target = RunFolder(root / run_id)
    if target.path.exists():
        raise TransferError(f"{target.path} exists already; remove it first to install {run_id} again")
    aside = root / f".{run_id}.unpacking"  # the run is built in aside/<run_id>: a folder named by its run id
    shutil.rmtree(aside, ignore_errors=True)
    staging = RunFolder(aside / run_id)
    staging.checkpoint_dir.mkdir(parents=True)
    for name in ("config.json", METRICS):
        atomic_write_bytes(staging.path / name, members[name])
    for step, data in checkpoints.items():
        atomic_write_bytes(staging.checkpoint_path(step), data)
    summary = json.loads(members["summary.json"])
    staging.write_complete({**summary, **staging.fingerprint()})
    problem = verify(staging)
    if problem is not None:
        shutil.rmtree(aside)
        raise TransferError(f"{run_id} as packed is not a whole run: {problem}")
    staging.path.rename(target.path)  # appears whole or not at all
    aside.rmdir()
    missing = tuple(sorted(set(record["checkpoints"]) - set(checkpoints)))
    skipped = tuple(Path(m["path"]) for (run, _), m in sorted(manifests.items()) if run != run_id)
    return Installed(Run(target.path), missing, skipped)
