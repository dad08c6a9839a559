"""Where segdiff keeps things by default: the result cache and the runtimes' compilation
caches, both in the user's cache folder (platformdirs)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from platformdirs import user_cache_dir

__all__ = [
    "compilation_cache_dir",
    "compilation_cache_problem",
    "compilation_entry",
    "default_cache_dir",
    "ownership_problem",
]


def default_cache_dir() -> Path:
    """``$SEGDIFF_CACHE`` if set, else the platform's user cache folder (``~/.cache/segdiff``)."""
    override = os.environ.get("SEGDIFF_CACHE")
    return Path(override) if override else Path(user_cache_dir("segdiff", appauthor=False))


def _compilation_base() -> Path:
    override = os.environ.get("SEGDIFF_COMPILATION_CACHE")
    return Path(override) if override else Path(user_cache_dir("segdiff", appauthor=False))


def compilation_cache_dir(runtime: str, model_hash: str = "") -> Path:
    """Where a runtime keeps its persistent compilation cache: one per user, shared by every
    result cache (``$SEGDIFF_COMPILATION_CACHE`` overrides it), and one folder per model
    (``model_hash``): an entry of one model's folder can never serve another model. Not inside
    a result cache: JAX's entries are keyed with the folder's own path (measured with jax
    0.10.2: a copy in another folder was missed entry by entry), so each new cache would
    compile again."""
    folder = _compilation_base() / "compiled" / runtime
    return folder / model_hash[:32] if model_hash else folder


def _private_group(gid: int) -> bool:
    """Whether group ``gid`` is the user's own private group (named after the user, with no
    other member: as many Linux systems give each user, with a umask that lets it write)."""
    try:
        import grp
        import pwd

        group = grp.getgrgid(gid)
        return group.gr_name == pwd.getpwuid(os.getuid()).pw_name and not group.gr_mem
    except (ImportError, KeyError):
        return False


def compilation_cache_problem(folder: Path) -> str:
    """Why the compilation cache in ``folder`` must not be used ("" when it may): a compiled
    executable runs as it is, so nobody else may put one there or swap a folder on the way
    (:func:`ownership_problem`, from the ``compiled`` folder segdiff makes under its base)."""
    base = _compilation_base()
    return ownership_problem(folder, base / "compiled", base)


def ownership_problem(path: Path, own_from: Path, base: Path) -> str:
    """Why what ``path`` holds must not be used as it is ("" when it may): the rule of every
    store whose contents run as they are (compiled executables, converted models). ``path``
    and every folder from it up to ``own_from`` must be the user's own and writable by nobody
    else; the folders above those, up to ``base`` (or the file system's root), may also be
    root's, and writable by others only where the sticky bit keeps them from renaming what is
    not theirs (``/tmp``). What is not made yet is not asked."""
    if not hasattr(os, "getuid"):  # Windows: its access lists are another matter
        return ""
    start = path
    while True:
        try:
            status = path.lstat()
        except FileNotFoundError:
            status = None
        except OSError as error:
            return f"{path} cannot be examined ({error.strerror})"
        ours = path in (start, own_from) or own_from in path.parents
        if status is not None and (problem := _unsafe(path, status, ours)):
            return problem
        if path == base or path.parent == path:
            return ""
        path = path.parent


def _unsafe(path: Path, status: os.stat_result, ours: bool) -> str:
    """What is wrong with one file or folder on the way to a store ("" if nothing)."""
    if stat.S_ISLNK(status.st_mode) and ours:
        return f"{path} is a symbolic link"
    if status.st_uid != os.getuid() and (ours or status.st_uid != 0):
        return f"{path} belongs to another user"
    others = status.st_mode & 0o002 or (
        status.st_mode & 0o020 and not _private_group(status.st_gid)
    )
    if others and (ours or not status.st_mode & stat.S_ISVTX):
        return f"{path} can be written by other users (mode {status.st_mode & 0o777:o})"
    return ""


def compilation_entry(root: Path) -> frozenset[str]:
    """``{"compiled"}`` where ``root`` is the folder that holds the runtimes' compilation
    cache (the default result cache is: a JAX run with any result cache would otherwise make
    the default one refuse itself as a folder of other files), else nothing."""
    home = compilation_cache_dir("jax").parent
    with contextlib.suppress(OSError):
        if home.parent.resolve() == root.resolve():
            return frozenset({home.name})
    return frozenset()
