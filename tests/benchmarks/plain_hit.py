"""The floor of the cache-hit benchmark: what no ``segdiff run`` served from the cache can go
below, written plainly. A Python process that imports numpy and h5py and reads the bytes of the
run files. Run: ``python plain_hit.py CACHE``."""

import sys
from pathlib import Path

import h5py  # noqa: F401 - its import is part of the floor
import numpy  # noqa: F401

read = sum(len(path.read_bytes()) for path in Path(sys.argv[1]).glob("runs/*/*.h5"))
print(f"read {read} bytes")
