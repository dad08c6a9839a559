"""What a run's key holds of the user's preprocessing code: the file named by
``--preprocess FILE.py:function`` and the modules it imports from its own folder, found by
reading the import statements of each (``import helper``, ``from helpers.norm import z``):
``helper.py``, or every Python file of the package ``helpers/``. The child puts that folder
first on the import path while the code loads and runs, as Python does for a script, and
refuses a module of the folder that it loaded but this reading did not find (an
``importlib.import_module`` of a computed name), so the key never misses code that ran.
Files the function reads (a ``mean.npy``) are not keyed: only code is.

With no such module the digest is the file's own SHA-256, as runs keyed before this kept."""

from __future__ import annotations

import ast
import hashlib
import os
import stat
from pathlib import Path

from segdiff_gui.core.errors import InputError
from segdiff_gui.core.hashing import canonical_json, hash_path

__all__ = ["MAX_CODE_FILES", "code_digest", "code_files"]

# More files than any preprocessing's helpers: a folder that is a whole project is refused
# before it is read, rather than hashed for minutes.
MAX_CODE_FILES = 512
_MAX_FILE_BYTES = 16 << 20
# What Python imports as a module of a folder: sources, and compiled extensions.
_SUFFIXES = (".py", ".so", ".pyd")
_TOO_MANY = (
    f"imports from its folder more than the {MAX_CODE_FILES} modules segdiff keys with your "
    "preprocessing; keep it in a folder of its own"
)


def _plain(path: Path) -> Path:
    """``path`` if it is a plain file within the bound (a FIFO named ``helper.py`` would
    block a read for ever), else the one line that says why not."""
    try:
        status = path.stat()
    except OSError as error:
        raise InputError(path, f"cannot be read: {error.strerror or error}") from None
    if not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_FILE_BYTES:
        raise InputError(path, f"is not a plain file of code under {_MAX_FILE_BYTES >> 20} MB")
    return path


def _imported_names(path: Path) -> set[str]:
    """The top-level names ``path``'s import statements name (anywhere in it: a function's
    own imports too); none where it is not Python (the child says that when it loads it)."""
    if path.suffix != ".py":
        return set()
    try:
        tree = ast.parse(_plain(path).read_bytes(), str(path))
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def _module_files(folder: Path, name: str) -> list[Path]:
    """The files of ``folder`` that ``import name`` could load: the package ``name/`` (every
    module in it) or ``name.py`` and its compiled forms; links not followed into."""
    package = folder / name
    if package.is_dir() and not package.is_symlink():
        found, walked = [], 0
        for root, folders, files in os.walk(package, followlinks=False):
            folders[:] = sorted(f for f in folders if f != "__pycache__")
            found += [Path(root, f) for f in sorted(files) if f.endswith(_SUFFIXES)]
            walked += len(folders) + len(files)
            if walked > 16 * MAX_CODE_FILES:
                raise InputError(
                    package, f"holds more than {16 * MAX_CODE_FILES:,} entries, more than "
                    "segdiff reads of a package your preprocessing imports"
                )  # fmt: skip
        return found
    return sorted(
        entry
        for entry in folder.glob(f"{name}.*")
        if entry.name == f"{name}.py" or entry.name.endswith((".so", ".pyd"))
    )


def code_files(path: Path) -> tuple[Path, ...]:
    """``path`` and the modules of its folder it imports, each once, the file first."""
    folder = path.parent
    files, names = [path], _imported_names(path)
    seen: set[str] = set()
    while names - seen:
        name = sorted(names - seen)[0]
        seen.add(name)
        for module in _module_files(folder, name):
            if module in files:
                continue
            files.append(module)
            if len(files) > MAX_CODE_FILES:
                raise InputError(path, _TOO_MANY)
            names |= _imported_names(module)
    return tuple(files)


def code_digest(path: str | Path) -> str:
    """The SHA-256 a run's key holds of the preprocessing file ``path``: its bytes, and
    those of each module of its folder it imports, by their names in the folder."""
    path = Path(path)
    files = code_files(path)
    if len(files) == 1:
        return hash_path(path)
    listing = []
    for file in files:
        listing.append([file.relative_to(path.parent).as_posix(), hash_path(_plain(file))])
    return hashlib.sha256(canonical_json(listing).encode()).hexdigest()
