"""segdiff: see which pixels of a segmentation model's probability map change, and why."""

__version__ = "0.1.0"
