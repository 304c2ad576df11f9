"""Output: contract records, a JSONL writer that flushes each line and can resume, the manifest,
and merging files (shards of one run, or several runs into one set).

A run writes `<out>.part` (one flushed line per example) and `<out>.manifest.json` (status
"running"); dropped examples go to `<out>.dropped.jsonl`. Only a finished run renames `.part` to
`<out>` and marks the manifest "complete", so a file at `<out>` is always whole.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import generation
from generation.sentences import SPLITTER
from roftcore.records import RecordError, validate
from roftcore.version import code_version as roftcore_version

# Settings that do not change which examples a run makes: a resumed run may differ in them.
VOLATILE_SETTINGS = frozenset({"resume", "overwrite", "batch_size", "device", "progress", "out"})


class OutputError(RuntimeError):
    """An output that cannot be written or resumed (the message says what to do)."""


def paths_for(out: Path) -> dict[str, Path]:
    out = Path(out)
    return {
        "out": out,
        "part": out.with_name(out.name + ".part"),
        "manifest": out.with_name(out.name + ".manifest.json"),
        "dropped": out.with_name(out.name + ".dropped.jsonl"),
        "lock": out.with_name(out.name + ".lock"),
    }


class OutputLock:
    """An exclusive lock on one output (`OUT.lock`, flock): a second run writing the same output,
    such as a --resume while the first still runs, stops at once instead of mixing its lines in.
    The lock goes with the process (a killed run leaves no stale lock)."""

    def __init__(self, out: Path):
        self.path = paths_for(out)["lock"]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._handle.seek(0)
            holder = self._handle.read().strip() or "another process"
            self._handle.close()
            raise OutputError(
                f"{paths_for(out)['out']} is being written by {holder}: wait for that run to "
                "finish (or stop it) before running again"
            ) from None
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(f"process {os.getpid()}\n")
        self._handle.flush()

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()


def shard_path(out: Path, index: int, count: int) -> Path:
    out = Path(out)
    return out.with_name(f"{out.stem}.shard-{index:02d}-of-{count:02d}{out.suffix}")


def make_record(
    *,
    id: str,
    category: str,
    system: str,
    sentences: list[str],
    boundary: int,
    doc_id: str,
    dataset: str,
    decoding: dict | None = None,
    seed: int | None = None,
    source_extra: dict | None = None,
    meta: dict | None = None,
    provenance: dict | None = None,
    system_label: str | None = None,
) -> dict:
    """One example in the contract format (roftcore.records); the writer validates it."""
    record = {
        "id": id,
        "category": category,
        "system": system,
        "sentences": list(sentences),
        "boundary": boundary,
        "decoding": decoding,
        "seed": seed,
        "source": {
            "dataset": dataset,
            "doc_id": doc_id,
            "splitter": SPLITTER,
            **(source_extra or {}),
        },
        "meta": dict(meta or {}),
    }
    if system_label:
        record["system_label"] = system_label
    if provenance is not None:
        record["provenance"] = provenance
    return record


def base_provenance(method: str, version: str | None = None, **generation) -> dict:
    """`provenance` for a record no model wrote (method "human" or "splice"), in the same shape as
    a model's (roftcore.records.PROVENANCE_FIELDS): no model or weights, the code version, and how
    the text was put together in `generation`."""
    return {
        "model": None,
        "weights_sha256": None,
        "hub_commit": None,
        "code_version": version or code_version(),
        "generation": {"method": method, **generation},
    }


def check_record(record: dict) -> None:
    """Validate a record with the contract (roftcore.records) before it is written."""
    try:
        validate(record, 1)
    except RecordError as error:
        raise OutputError(
            f"{record.get('id')!r} breaks the example format: {error.message}"
        ) from None


def p_bin(p: float | None) -> str:
    """Bins of 0.2 for the drop counts ("0.0-0.2" holds 0, greedy); "none" when not decoded."""
    if p is None:
        return "none"
    low = min(int(p * 5), 4) / 5
    return f"{low:.1f}-{low + 0.2:.1f}"


def code_version() -> str:
    """The package version and, in a git checkout, the commit (with "+dirty" for local edits)."""
    return roftcore_version("generation", generation.__version__)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_json_atomic(path: Path, obj: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_complete_lines(path: Path) -> list[dict]:
    """The whole JSON lines of a file a killed run left; a torn last line is cut off the file."""
    if not path.exists():
        return []
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    rows = []
    for number, line in enumerate(data[:keep].splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise OutputError(
                    f"{path}:{number}: cannot resume, the line is not JSON ({error.msg})"
                ) from None
    if keep < len(data):
        with path.open("r+b") as handle:
            handle.truncate(keep)
    return rows


@dataclass
class Counts:
    planned: int = 0
    skipped_documents: int = 0
    made: Counter = field(default_factory=Counter)  # by system
    dropped: Counter = field(default_factory=Counter)  # by reason
    filtered_words: Counter = field(default_factory=Counter)
    retries: int = 0
    repaired: int = 0  # examples the unbatched check corrected (see generation.generator)
    unsettled: int = 0  # examples still not agreeing after the most repairs
    replacements: int = 0  # examples tried in place of rejected ones (same h and decoding)
    # "p" (bins of 0.2) and "prompt_sentences" (h) -> bin -> planned / made / dropped:<reason>
    by: dict = field(
        default_factory=lambda: {"p": defaultdict(Counter), "prompt": defaultdict(Counter)}
    )

    def note(self, what: str, p: float | None, h: int | None) -> None:
        self.by["p"][p_bin(p)][what] += 1
        self.by["prompt"][str(h) if h is not None else "none"][what] += 1

    def _breakdown(self, name: str) -> dict:
        out = {}
        for key in sorted(self.by[name], key=lambda k: (len(k), k)):
            counter = self.by[name][key]
            dropped = {
                k.split(":", 1)[1]: v for k, v in counter.items() if k.startswith("dropped:")
            }
            planned = counter.get("planned", 0)
            out[key] = {
                "planned": planned,
                "made": counter.get("made", 0),
                "dropped": sum(dropped.values()),
                "drop_rate": round(sum(dropped.values()) / planned, 4) if planned else None,
                "dropped_by_reason": dict(sorted(dropped.items())),
            }
        return out

    def to_json(self) -> dict:
        return {
            "planned": self.planned,
            "made": sum(self.made.values()),
            "made_by_system": dict(sorted(self.made.items())),
            "skipped_documents": self.skipped_documents,
            "dropped": sum(self.dropped.values()),
            "dropped_by_reason": dict(sorted(self.dropped.items())),
            "filtered_words": dict(sorted(self.filtered_words.items())),
            "retries": self.retries,
            "repaired": self.repaired,
            "unsettled": self.unsettled,
            "replacements": self.replacements,
            "by_p": self._breakdown("p"),
            "by_prompt_sentences": self._breakdown("prompt"),
            "boundaries": self.boundaries(),
        }

    def boundaries(self) -> dict:
        """The requested boundary distribution (h -> planned examples) and the kept one (h ->
        written examples), over the same h values."""
        keys = sorted((k for k in self.by["prompt"] if k != "none"), key=lambda k: (len(k), k))
        return {
            "requested": {k: self.by["prompt"][k].get("planned", 0) for k in keys},
            "kept": {k: self.by["prompt"][k].get("made", 0) for k in keys},
        }


def boundary_report(counts: Counts) -> list[str]:
    """Lines that show the requested and the kept boundary distribution side by side (counts and
    shares), and say whether they match."""
    table = counts.boundaries()
    requested, kept = table["requested"], table["kept"]
    if not requested:
        return []
    total_r, total_k = sum(requested.values()), sum(kept.values())

    def share(count: int, total: int) -> str:
        return f"{count / total:.3f}" if total else "-"

    lines = ["boundary h  requested  share  kept  share"]
    for h in requested:
        lines.append(
            f"{h:>10}  {requested[h]:>9}  {share(requested[h], total_r)}  {kept[h]:>4}  "
            f"{share(kept[h], total_k)}"
        )
    lines.append(f"{'all':>10}  {total_r:>9}  {'':5}  {total_k:>4}")
    short = {h: requested[h] - kept[h] for h in requested if kept[h] < requested[h]}
    if short:
        detail = ", ".join(f"h={h}: {n}" for h, n in short.items())
        lines.append(
            f"the kept set is short of the requested one ({detail}): rejected examples that "
            "no replacement could stand in for (see the dropped file); raise --resample-rounds "
            "or check the corpus"
        )
    else:
        lines.append("the kept boundary distribution matches the requested one")
    return lines


def _record_p(record: dict) -> float | None:
    decoding = record.get("decoding") or {}
    return decoding.get("p")


class RunWriter:
    """Write one run's examples, resuming a killed run when asked."""

    def __init__(self, out: Path, settings: dict, *, resume: bool = False, overwrite: bool = False):
        self.paths = paths_for(out)
        self.settings = settings
        self.done_ids: set[str] = set()
        self.dropped_ids: set[str] = set()
        self.counts = Counts()
        self.already_complete = False
        self.started = _now()
        self.warnings: list[str] = []
        self.lock = OutputLock(out)
        try:
            self._open(resume, overwrite)
        except BaseException:
            self.lock.release()
            raise

    def _open(self, resume: bool, overwrite: bool) -> None:
        out_path, manifest = self.paths["out"], self.paths["manifest"]
        if resume and manifest.exists():
            previous = json.loads(manifest.read_text(encoding="utf-8"))
            self._check_same_settings(previous.get("settings", {}))
            if previous.get("status") == "complete" and out_path.exists():
                self.already_complete = True
                self.lock.release()
                return
        elif out_path.exists() and not overwrite:
            raise OutputError(
                f"{out_path} already exists: pass --overwrite to replace it"
                + ("" if resume else " (or --resume to finish a killed run)")
            )
        elif not resume and self.paths["part"].exists() and not overwrite:
            raise OutputError(
                f"{self.paths['part']} is left from an unfinished run: pass --resume to finish it "
                "or --overwrite to start again"
            )
        if resume:
            for row in _read_complete_lines(self.paths["part"]):
                self.done_ids.add(row["id"])
                self.counts.made[row["system"]] += 1
                self.counts.note("made", _record_p(row), row.get("boundary"))
            for row in _read_complete_lines(self.paths["dropped"]):
                self.dropped_ids.add(row["id"])
                self.counts.dropped[row["reason"]] += 1
                self.counts.note(f"dropped:{row['reason']}", row.get("p"), row.get("h"))
                for word in row.get("words", []):
                    self.counts.filtered_words[word] += 1
        else:
            for key in ("part", "dropped"):
                self.paths[key].unlink(missing_ok=True)
        if out_path.exists():
            out_path.unlink()
        self._handle = self.paths["part"].open("a", encoding="utf-8")
        self._dropped = self.paths["dropped"].open("a", encoding="utf-8")
        self.write_manifest("running")

    def _check_same_settings(self, previous: dict) -> None:
        keys = (set(previous) | set(self.settings)) - VOLATILE_SETTINGS
        changed = sorted(k for k in keys if previous.get(k) != self.settings.get(k))
        if changed:
            detail = ", ".join(
                f"{k}: {previous.get(k)!r} -> {self.settings.get(k)!r}" for k in changed
            )
            raise OutputError(
                f"cannot resume {self.paths['out']}: settings differ from the run that wrote it "
                f"({detail}); use the same settings, or --overwrite to start again"
            )

    def plan(self, tasks: list, skipped_documents: int) -> None:
        """Count what the run means to make (overall, by p bin and by prompt length)."""
        self.counts.planned = len(tasks)
        self.counts.skipped_documents = skipped_documents
        for counter in self.counts.by.values():
            for bin_counts in counter.values():
                bin_counts.pop("planned", None)
        for task in tasks:
            self.counts.note("planned", task.p, task.h)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def is_done(self, example_id: str) -> bool:
        return example_id in self.done_ids or example_id in self.dropped_ids

    def write(self, record: dict) -> None:
        if record["id"] in self.done_ids:
            raise OutputError(f"duplicate example id {record['id']!r}")
        check_record(record)
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()
        self.done_ids.add(record["id"])
        self.counts.made[record["system"]] += 1
        self.counts.note("made", _record_p(record), record["boundary"])

    def drop(
        self,
        example_id: str,
        reason: str,
        words: list[str] | None = None,
        *,
        p: float | None = None,
        h: int | None = None,
    ) -> None:
        row = {"id": example_id, "reason": reason, "p": p, "h": h}
        if words:
            row["words"] = words
            for word in words:
                self.counts.filtered_words[word] += 1
        self._dropped.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._dropped.flush()
        self.dropped_ids.add(example_id)
        self.counts.dropped[reason] += 1
        self.counts.note(f"dropped:{reason}", p, h)

    def write_manifest(self, status: str, error: str | None = None, extra: dict | None = None):
        manifest = {
            "status": status,
            "output": self.paths["out"].name,
            "code_version": code_version(),
            "splitter": SPLITTER,
            "started": self.started,
            "updated": _now(),
            "settings": self.settings,
            "counts": self.counts.to_json(),
            "warnings": self.warnings,
            **(extra or {}),
        }
        if error:
            manifest["error"] = error
        write_json_atomic(self.paths["manifest"], manifest)

    def close(self) -> None:
        for handle in (self._handle, self._dropped):
            if not handle.closed:
                handle.close()
        self.lock.release()

    def finish(self, extra: dict | None = None) -> None:
        for handle in (self._handle, self._dropped):
            handle.close()
        os.replace(self.paths["part"], self.paths["out"])
        self.write_manifest("complete", extra=extra)
        self.close()

    def fail(self, error: str, extra: dict | None = None) -> None:
        for handle in (self._handle, self._dropped):
            handle.close()
        self.write_manifest("incomplete", error=error, extra=extra)
        self.close()


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise OutputError(f"{path}:{number}: not valid JSON ({error.msg})") from None
    return rows


def merge(inputs: list[Path], out: Path, *, by_task: bool = False, extra: dict | None = None):
    """Concatenate finished outputs into `out` (ids must be unique); with `by_task`, shards of one
    run are put back in plan order (`meta.task`). An all-human example that two runs both made
    (the same id and the same sentences, e.g. from two systems' runs of one plan) is kept once.
    Returns the merged manifest."""
    # Asked before `out` is written: rewriting a tracked output would read as a local edit.
    version = code_version()
    records: list[dict] = []
    manifests = []
    seen: dict[str, tuple[Path, dict]] = {}
    for path in inputs:
        path = Path(path)
        manifest_path = paths_for(path)["manifest"]
        if not path.exists():
            raise OutputError(f"{path}: no such file (is the run finished?)")
        if manifest_path.exists():
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            if manifest.get("status") != "complete":
                raise OutputError(f"{path}: its manifest says the run is {manifest.get('status')}")
            manifests.append({"file": path.name, **manifest})
        for row in read_jsonl(path):
            if row["id"] in seen:
                where, first = seen[row["id"]]
                if _same_human_text(first, row):
                    continue
                raise OutputError(f"{path}: id {row['id']!r} is also in {where}")
            seen[row["id"]] = (path, row)
            records.append(row)
    if by_task:
        records.sort(key=lambda r: r.get("meta", {}).get("task", 0))
    out = Path(out)
    lock = OutputLock(out)
    try:
        tmp = out.with_name(out.name + ".part")
        with tmp.open("w", encoding="utf-8") as handle:
            for row in records:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
        return _merged_manifest(out, records, manifests, extra, version)
    finally:
        lock.release()


def _same_human_text(a: dict, b: dict) -> bool:
    """Both are the same all-human example: one passage's same sentences, no model's text."""
    return (
        a.get("system") == b.get("system") == "human"
        and a.get("sentences") == b.get("sentences")
        and a.get("boundary") == b.get("boundary")
        and (a.get("source") or {}).get("doc_id") == (b.get("source") or {}).get("doc_id")
    )


def _merged_manifest(
    out: Path, records: list[dict], manifests: list[dict], extra: dict | None, version: str
):
    totals = Counts()
    for manifest in manifests:
        counts = manifest.get("counts", {})
        totals.planned += counts.get("planned", 0)
        totals.skipped_documents += counts.get("skipped_documents", 0)
        totals.made.update(counts.get("made_by_system", {}))
        totals.dropped.update(counts.get("dropped_by_reason", {}))
        totals.filtered_words.update(counts.get("filtered_words", {}))
        totals.retries += counts.get("retries", 0)
        totals.repaired += counts.get("repaired", 0)
        totals.unsettled += counts.get("unsettled", 0)
        totals.replacements += counts.get("replacements", 0)
        for name, key in (("p", "by_p"), ("prompt", "by_prompt_sentences")):
            for bin_name, row in counts.get(key, {}).items():
                target = totals.by[name][bin_name]
                target["planned"] += row.get("planned", 0)
                target["made"] += row.get("made", 0)
                for reason, count in row.get("dropped_by_reason", {}).items():
                    target[f"dropped:{reason}"] += count
    if not manifests:
        totals.made.update(Counter(r["system"] for r in records))
    merged = {
        "status": "complete",
        "output": out.name,
        "code_version": version,
        "splitter": SPLITTER,
        "updated": _now(),
        "merged_from": manifests,
        "counts": totals.to_json(),
        "examples": len(records),
        "warnings": sorted({w for m in manifests for w in m.get("warnings", [])}),
        **(extra or {}),
    }
    write_json_atomic(paths_for(out)["manifest"], merged)
    return merged
