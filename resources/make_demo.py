"""Regenerate segdiff's bundled demo: synthetic cell images, ground truth and two small U-Nets.

Outputs (under ``--out``, default ``segdiff_gui/resources/demo/``, shipped in the package):

* ``images/cell_00.png`` .. ``cell_15.png`` - 256x256 8-bit grayscale, fluorescence-like cells:
  ellipses of varied size and orientation with a brighter nucleus, blurred edges, uneven
  illumination, Poisson + Gaussian noise, some cells touching.
* ``masks/cell_XX.png`` - binary ground truth (0 background, 255 cell).
* ``masks3/cell_XX.png`` - 3-class ground truth (0 background, 1 cytoplasm, 2 nucleus).
* ``unet_sigmoid.keras`` - U-Net with a 1-channel sigmoid output (layer ``foreground``).
* ``unet_softmax3.keras`` - the same U-Net with a 3-channel softmax output (layer ``classes``).

Both models take a fixed ``(256, 256, 1)`` input named ``image`` (pixels scaled by 1/255), use
only built-in layers and load with ``keras.models.load_model(path, safe_mode=True)``.

Why the models are deliberately "soft": segdiff shows which pixels of a probability map change
with device, batch size, precision or the next run. A map that is saturated at 0 or 1 everywhere
shows nothing interesting. The models are therefore trained briefly against blurred targets on
images with blurred edges, so every cell boundary carries a band of pixels close to the 0.5
cutoff - exactly the pixels that flip between a CPU and a GPU run.

The models are trained on a separate set of synthetic images (different seeds, never the 16 demo
images). Data generation is pure numpy and bit-identical across reruns; training fixes every seed,
enables TensorFlow op determinism and pins the thread pools, so reruns on the same machine give
identical weights as far as TensorFlow allows.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np
from PIL import Image

SIZE = 256
N_DEMO = 16
N_TRAIN = 128
DEMO_SEED = 20240611
TRAIN_SEED = 77031
KERAS_SEED = 1234
CROP = 128
EPOCHS_SIGMOID = 16
EPOCHS_SOFTMAX = 60
BATCH = 8


def gaussian_blur(img: np.ndarray, sigma: float) -> np.ndarray:
    """Separable Gaussian blur of the last two axes (reflect padding), float64 in and out."""
    radius = max(1, int(round(3 * sigma)))
    taps = np.exp(-0.5 * (np.arange(-radius, radius + 1) / sigma) ** 2)
    taps /= taps.sum()
    out = np.asarray(img, dtype=np.float64)
    for axis in (-2, -1):
        moved = np.moveaxis(out, axis, 0)
        pad = [(radius, radius)] + [(0, 0)] * (moved.ndim - 1)
        padded = np.pad(moved, pad, mode="reflect")
        n = moved.shape[0]
        acc = np.zeros_like(moved)
        for i, w in enumerate(taps):
            acc += w * padded[i : i + n]
        out = np.moveaxis(acc, 0, axis)
    return out


def ellipse_distance(yy, xx, cy, cx, a, b, angle, wobble):
    """Normalised distance to an irregular ellipse: < 1 inside, 1 on the boundary."""
    cos, sin = np.cos(angle), np.sin(angle)
    u = ((xx - cx) * cos + (yy - cy) * sin) / a
    v = (-(xx - cx) * sin + (yy - cy) * cos) / b
    theta = np.arctan2(v, u)
    radius = 1.0 + sum(amp * np.sin(k * theta + phase) for k, amp, phase in wobble)
    return np.hypot(u, v) / radius


def place_cells(rng: np.random.Generator) -> list[dict]:
    """Random cell geometry; centres may sit close enough for neighbours to touch."""
    cells: list[dict] = []
    sizes: list[float] = []
    target = int(rng.integers(4, 13))
    for _ in range(400):
        if len(cells) == target:
            break
        a = rng.uniform(13, 32)
        cell = {
            "cy": rng.uniform(10, SIZE - 10),
            "cx": rng.uniform(10, SIZE - 10),
            "a": a,
            "b": a * rng.uniform(0.55, 0.95),
            "angle": rng.uniform(0, np.pi),
            "wobble": [
                (k, rng.uniform(0, amp), rng.uniform(0, 2 * np.pi))
                for k, amp in ((2, 0.08), (3, 0.06), (5, 0.03))
            ],
        }
        size = 0.5 * (cell["a"] + cell["b"])
        centre = np.array([cell["cy"], cell["cx"]])
        if all(
            np.hypot(*(centre - [o["cy"], o["cx"]])) > 0.75 * (size + s)
            for o, s in zip(cells, sizes, strict=True)
        ):
            cells.append(cell)
            sizes.append(size)
    return cells


def smooth_noise(rng: np.random.Generator, sigma: float) -> np.ndarray:
    """Zero-mean, unit-std low-frequency noise field."""
    field = gaussian_blur(rng.standard_normal((SIZE, SIZE)), sigma)
    return (field - field.mean()) / (field.std() + 1e-12)


def make_sample(seed: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """One synthetic image (uint8) and its 3-class label map (0 bg, 1 cytoplasm, 2 nucleus)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    cells = place_cells(rng)
    dist = np.stack([ellipse_distance(yy, xx, **c) for c in cells])
    owner = np.argmin(dist, axis=0)
    inside = np.min(dist, axis=0) < 1.0
    labels = inside.astype(np.uint8)
    signal = np.zeros((SIZE, SIZE))
    texture = smooth_noise(rng, 2.0)
    for k, c in enumerate(cells):
        own = inside & (owner == k)
        cyto = rng.uniform(40, 100)
        signal[own] = cyto * (1.0 - 0.35 * dist[k][own] ** 2)
        shift = rng.uniform(-0.25, 0.25, size=2) * c["b"]
        scale = rng.uniform(0.35, 0.55)
        ny, nx = c["cy"] + shift[0], c["cx"] + shift[1]
        na, nb = c["a"] * scale, c["b"] * scale * rng.uniform(0.8, 1.2)
        angle = rng.uniform(0, np.pi)
        wobble = [(k2, rng.uniform(0, 0.06), rng.uniform(0, 2 * np.pi)) for k2 in (2, 3)]
        nuc_d = ellipse_distance(yy, xx, ny, nx, na, nb, angle, wobble)
        nucleus = own & (nuc_d < 1.0)
        labels[nucleus] = 2
        signal[nucleus] += rng.uniform(35, 90) * (1.0 - 0.2 * nuc_d[nucleus] ** 2)
    signal *= 1.0 + 0.12 * texture
    signal = gaussian_blur(signal, rng.uniform(1.2, 2.4))
    gy, gx = rng.uniform(-1, 1, size=2)
    illum = 1.0 + 0.5 * (gy * (yy / SIZE - 0.5) + gx * (xx / SIZE - 0.5))
    illum += 0.1 * smooth_noise(rng, 32.0)
    background = rng.uniform(12, 35) + 8.0 * smooth_noise(rng, 24.0)
    clean = np.clip((signal + background) * illum, 0, None)
    gain = rng.uniform(0.6, 1.6)
    noisy = rng.poisson(clean * gain) / gain + rng.normal(0, rng.uniform(1.5, 4.0), clean.shape)
    return np.clip(np.rint(noisy), 0, 255).astype(np.uint8), labels


def make_set(base_seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    samples = [make_sample((base_seed, i)) for i in range(count)]
    return np.stack([s[0] for s in samples]), np.stack([s[1] for s in samples])


def write_demo(out: Path, images: np.ndarray, labels: np.ndarray) -> str:
    """Write images/masks/masks3 PNGs; return a SHA-256 over all written pixels."""
    digest = hashlib.sha256()
    for sub in ("images", "masks", "masks3"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for i, (img, lab) in enumerate(zip(images, labels, strict=True)):
        name = f"cell_{i:02d}.png"
        binary = np.where(lab > 0, 255, 0).astype(np.uint8)
        for sub, arr in (("images", img), ("masks", binary), ("masks3", lab)):
            Image.fromarray(arr).save(out / sub / name)
            digest.update(arr.tobytes())
    return digest.hexdigest()


def configure_tensorflow() -> None:
    import keras
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")  # train on CPU whatever the machine has
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(KERAS_SEED)


def build_unet(size: int, head: str):
    """Two-level U-Net (8/16/32 filters). head: 'sigmoid' (1 channel) or 'softmax3'."""
    import keras
    from keras import layers

    def block(x, filters, name):
        for j in (1, 2):
            x = layers.Conv2D(filters, 3, padding="same", activation="relu", name=f"{name}_{j}")(x)
        return x

    inp = keras.Input((size, size, 1), name="image")
    e1 = block(inp, 8, "enc1")
    e2 = block(layers.MaxPooling2D(name="pool1")(e1), 16, "enc2")
    mid = block(layers.MaxPooling2D(name="pool2")(e2), 32, "mid")
    d2 = layers.Concatenate(name="skip2")([layers.UpSampling2D(name="up2")(mid), e2])
    d2 = block(d2, 16, "dec2")
    d1 = layers.Concatenate(name="skip1")([layers.UpSampling2D(name="up1")(d2), e1])
    d1 = block(d1, 8, "dec1")
    if head == "sigmoid":
        out = layers.Conv2D(1, 1, activation="sigmoid", name="foreground")(d1)
    else:
        out = layers.Conv2D(3, 1, activation="softmax", name="classes")(d1)
    return keras.Model(inp, out, name=f"unet_{head}")


def soft_targets(labels: np.ndarray, head: str) -> np.ndarray:
    """Blurred targets so the network learns gradual, not saturated, boundaries."""
    if head == "sigmoid":
        return gaussian_blur((labels > 0).astype(np.float64), 1.5)[..., None].astype(np.float32)
    onehot = np.stack([labels == c for c in range(3)], axis=1).astype(np.float64)
    return np.moveaxis(gaussian_blur(onehot, 1.0), 1, -1).astype(np.float32)


def random_crops(rng, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One random CROPxCROP window (with random flips) per image, in shuffled order."""
    xs, ys = [], []
    for i in rng.permutation(len(x)):
        r, c = rng.integers(0, SIZE - CROP + 1, size=2)
        xi, yi = x[i, r : r + CROP, c : c + CROP], y[i, r : r + CROP, c : c + CROP]
        if rng.random() < 0.5:
            xi, yi = xi[:, ::-1], yi[:, ::-1]
        if rng.random() < 0.5:
            xi, yi = xi[::-1], yi[::-1]
        xs.append(xi)
        ys.append(yi)
    return np.ascontiguousarray(np.stack(xs)), np.ascontiguousarray(np.stack(ys))


def train_model(head: str, images: np.ndarray, labels: np.ndarray, epochs: int):
    """Train on crops (fully convolutional), then copy weights into the fixed 256x256 model."""
    import keras

    keras.utils.set_random_seed(KERAS_SEED)
    x = (images.astype(np.float32) / 255.0)[..., None]
    y = soft_targets(labels, head)
    trainer = build_unet(CROP, head)
    loss = "binary_crossentropy" if head == "sigmoid" else "categorical_crossentropy"
    trainer.compile(optimizer=keras.optimizers.Adam(3e-3), loss=loss)
    rng = np.random.default_rng((TRAIN_SEED, 99))
    for epoch in range(epochs):
        xb, yb = random_crops(rng, x, y)
        hist = trainer.fit(xb, yb, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
        print(f"  {head} epoch {epoch + 1:2d}/{epochs} loss {hist.history['loss'][-1]:.4f}")
    model = build_unet(SIZE, head)
    model.set_weights(trainer.get_weights())
    return model


def evaluate(path: Path, images: np.ndarray, labels: np.ndarray) -> str:
    """Reload with safe_mode and summarise near-cutoff pixels and agreement with ground truth."""
    import keras

    model = keras.models.load_model(path, safe_mode=True)
    pred = model.predict((images.astype(np.float32) / 255.0)[..., None], batch_size=4, verbose=0)
    if pred.shape[-1] == 1:
        p = pred[..., 0]
        near = int(np.sum((p >= 0.45) & (p <= 0.55)))
        fg, gt = p > 0.5, labels > 0
        dice = 2 * np.sum(fg & gt) / (np.sum(fg) + np.sum(gt))
        return f"near-cutoff [0.45,0.55]: {near} px ({near / len(p):.0f}/image), Dice {dice:.3f}"
    top = np.sort(pred, axis=-1)
    near = int(np.sum(top[..., -1] - top[..., -2] <= 0.1))
    cls = np.argmax(pred, axis=-1)
    acc = [float(np.mean(cls[labels == c] == c)) for c in range(3)]
    accs = ", ".join(f"{n} {a:.3f}" for n, a in zip(("bg", "cyto", "nuc"), acc, strict=True))
    return f"top-2 margin <= 0.1: {near} px ({near / len(pred):.0f}/image); accuracy {accs}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The demo ships inside the package (so an installed wheel has it); this script does not.
    default_out = Path(__file__).resolve().parent.parent / "segdiff_gui" / "resources" / "demo"
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--data-only", action="store_true", help="write images and masks only")
    args = parser.parse_args(argv)
    start = time.perf_counter()

    demo_images, demo_labels = make_set(DEMO_SEED, N_DEMO)
    digest = write_demo(args.out, demo_images, demo_labels)
    print(f"demo data: {N_DEMO} images -> {args.out}  sha256 {digest[:16]}")
    if args.data_only:
        return

    configure_tensorflow()
    train_images, train_labels = make_set(TRAIN_SEED, N_TRAIN)
    summary = []
    for head, epochs in (("sigmoid", EPOCHS_SIGMOID), ("softmax3", EPOCHS_SOFTMAX)):
        model = train_model(head, train_images, train_labels, epochs)
        path = args.out / f"unet_{head}.keras"
        model.save(path)
        summary.append(
            f"{path.name} ({path.stat().st_size / 1024:.0f} KiB, "
            f"{model.count_params()} params): "
            f"{evaluate(path, demo_images, demo_labels)}"
        )
    print("summary:")
    for line in summary:
        print("  " + line)
    print(f"  wall time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
