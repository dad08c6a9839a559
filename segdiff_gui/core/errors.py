"""Errors a user can fix: shown as one line that names the file and what is wrong."""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input (a model, image or cache file); ``str()`` is the one line shown to the user."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
