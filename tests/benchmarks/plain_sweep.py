"""The floor of the sweep benchmark: what a user writes to run a test set through a model.
Load the model, decode every image as segdiff's default preprocessing does (divided by 255),
``model.predict(x, batch_size=B)``, and write the maps to one HDF5 file.
Run: ``python plain_sweep.py MODEL OUT.h5 BATCH IMAGE...``."""

import sys

import h5py
import numpy as np
from PIL import Image


def main() -> int:
    import keras

    model_path, out, batch, *images = sys.argv[1:]
    model = keras.saving.load_model(model_path)
    x = np.stack([np.asarray(Image.open(p)).astype(np.float32)[..., None] / 255.0 for p in images])
    maps = model.predict(x, batch_size=int(batch), verbose=0)
    with h5py.File(out, "w") as handle:
        handle.create_dataset("maps", data=maps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
