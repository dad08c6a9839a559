"""segdiff's version, in a module of its own: every room records it (in provenance, bundles
and reports), and none may import the package's front door for it."""

__all__ = ["__version__"]

__version__ = "0.1.0"
