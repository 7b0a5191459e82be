"""Every file and folder a run writes: checked before anything runs, written in one line or not.

A bad output path (a folder that cannot be made, a read-only place, a file in the way, a
full disk) is found at the start by :func:`check_output_file` / :func:`check_output_folder`,
the one check every writer uses: an :class:`OutputError` naming the option, the path, the
reason and the fix. A write that still fails later (the disk filled up mid-run) is
an :class:`OutputError` too, from :func:`write_failure`, in one line.

Nothing is created by a check: the nearest folder that exists gets a probe file, written
and removed again, so that a read-only or full file system is found (also for root,
whom permission bits do not stop).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from .errors import ModelsweepError

__all__ = [
    "OutputError",
    "check_output_file",
    "check_output_files",
    "check_output_folder",
    "write_failure",
    "write_file",
]


class OutputError(ModelsweepError):
    """A file, folder or store that cannot be written; the message names the fix."""


def _reason(error: OSError) -> str:
    """An OS error's reason in words, without the path (the message names it already)."""
    if error.errno == errno.EFBIG:
        return "file too large: the file size limit (ulimit -f) is reached"
    return error.strerror or type(error).__name__


def write_failure(what: str, path: Path | str, error: OSError, fix: str = "") -> OutputError:
    """The one line of a write that failed: ``what`` (e.g. ``the results journal``) at
    ``path`` and why; a full disk says to free space."""
    full = error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    fix = fix or (
        "free space on its disk or write it elsewhere"
        if full
        else "make the place writable or write it elsewhere"
    )
    return OutputError(f"{what} {path}: cannot write ({_reason(error)}); {fix}")


def write_file(path: Path | str, option: str, text: str) -> None:
    """Write ``text`` to ``path`` (its folder made as needed); a failure is one line."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise write_failure(option, path, error) from None


def _probe(folder: Path) -> None:
    """Write one byte into a new file in ``folder`` and remove it (raises OSError)."""
    handle, name = tempfile.mkstemp(dir=folder, prefix=".modelsweep-write-check-")
    try:
        os.write(handle, b"x")
        os.fsync(handle)
    finally:
        os.close(handle)
        os.unlink(name)


def _folder_problem(folder: Path) -> str | None:
    """Why files cannot be made in ``folder`` (made as needed), or None."""
    path = folder.absolute()
    existing = next((p for p in (path, *path.parents) if os.path.lexists(p)), Path("."))
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        _probe(existing)
    except OSError as error:
        return f"{existing}: {_reason(error)}"
    return None


def check_output_folder(path: Path | str, option: str) -> Path:
    """``path`` is a folder that exists or can be made, and files can be written in it."""
    folder = Path(path)
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputError(f"{option} {folder}: a file is there, not a folder; pass a folder")
    problem = _folder_problem(folder)
    if problem is not None:
        raise OutputError(
            f"{option} {folder}: cannot write there ({problem}); pass a folder you can write to"
        )
    return folder


def check_output_file(path: Path | str, option: str) -> Path:
    """``path`` can be written: not a folder, its folder exists or can be made and takes a
    new file, and a file already there can be opened for writing."""
    target = Path(path)
    if not str(path).strip():
        raise OutputError(f"{option} {str(path)!r}: an empty path; pass a file path")
    if target.is_dir():
        raise OutputError(
            f"{option} {target}: a folder is there, not a file; pass the path of "
            "a file (in that folder or elsewhere)"
        )
    problem = _folder_problem(target.parent)
    if problem is None and os.path.lexists(target):
        try:
            open(target, "ab").close()
        except OSError as error:
            problem = _reason(error)
    if problem is not None:
        raise OutputError(
            f"{option} {target}: cannot write there ({problem}); pass a path "
            "in a folder you can write to"
        )
    return target


def check_output_files(paths: Mapping[str, Path | str | None]) -> None:
    """Each given path (option → path) checked by :func:`check_output_file`, and no two options
    naming one file: the later write would replace the earlier one's file."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        check_output_file(path, option)
        same = Path(os.path.realpath(path))
        if same in seen:
            raise OutputError(
                f"{option} {path}: the same file as {seen[same]}; one would "
                f"replace the other: pass {option} another path"
            )
        seen[same] = f"{option} {path}"
