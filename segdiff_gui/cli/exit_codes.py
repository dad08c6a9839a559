"""``segdiff``'s exit codes: 0 done, 1 a run failed (or a gate or a test set did not pass),
2 bad input, 3 an internal error, 130 interrupted."""

from __future__ import annotations

__all__ = ["EXIT_FAILED_RUNS", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE"]

EXIT_OK, EXIT_FAILED_RUNS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
