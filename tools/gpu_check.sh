#!/usr/bin/env bash
# The GPU check (issue 14): on a machine with an NVIDIA GPU, run the demo model under cpu vs
# gpu, batch 1 vs 64, op determinism on/off, TF32 on/off, repeats within one process and in
# fresh processes, for every runtime this Python has (TensorFlow where installed; JAX and
# PyTorch otherwise), write a bundle, and print `segdiff devices`, `compare` and `diagnose`.
#
#   tools/gpu_check.sh [OUT]        OUT: where the cache and the bundle go (default gpu-check)
#
# TF32 predicted against measured (issue 36): each Keras runtime's emulate=tf32 run on the
# CPU beside its GPU runs with TF32 on and off (TensorFlow's switch, JAX's default matmul
# precision "tensorfloat32" against "highest", PyTorch's allow_tf32), compared by
# tools/tf32_check.py: differing pixels, max ULP, max |Δ| and flips at 0.5 of each pair; each
# runtime (TensorFlow, JAX, PyTorch) emulates in its own ops. Without an NVIDIA GPU (no
# working nvidia-smi) the script says so and makes a dry run on the CPU: each runtime's plain
# and emulated run, once each, and the prediction alone.
#
# PYTHON picks the interpreter (default python3); segdiff must be importable by it (installed,
# or PYTHONPATH=. in a checkout). Keeps to a few minutes on one GPU: one image, 3 repeats.
#
# On a machine with JAX and PyTorch but no TensorFlow and no package index (the lent H200),
# carry wheels of keras, optree, namex, platformdirs and isal for Python 3.12 in .whl/ and run
#   pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
#   PYTHONPATH=/tmp/site:. tools/gpu_check.sh "$OUT"
# Without TensorFlow the TensorFlow runs are left out (only installed runtimes are run).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-check}
PY=${PYTHON:-python3}
segdiff() { "$PY" -m segdiff_gui.cli "$@"; }

mkdir -p "$OUT"
CACHE="$OUT/cache"
MODEL=segdiff_gui/resources/demo/unet_sigmoid.keras
IMAGES=segdiff_gui/resources/demo/images
runtimes=$("$PY" -c 'from segdiff_gui.core.runtimes import installed_runtimes
print(" ".join(r.name for r in installed_runtimes()))')
echo "runtimes here: $runtimes"
segdiff devices --cache "$CACHE"

if nvidia-smi -L >/dev/null 2>&1; then
    gpu=yes
    repeats=3
else
    gpu=""
    repeats=1
    echo "no NVIDIA GPU here (nvidia-smi -L fails): a dry run on the CPU, nothing measured"
fi

configs=()
reference=""
for runtime in ${gpu:+$runtimes}; do
    prefix="runtime=$runtime,"
    [ -z "$reference" ] && reference=$( [ "$runtime" = tensorflow ] && echo "cpu b1" || echo "$runtime cpu b1")
    for spec in device=cpu,batch=1 device=gpu:0,batch=1 device=gpu:0,batch=64 \
                device=gpu:0,batch=1,determinism=on device=gpu:0,batch=64,determinism=on \
                device=gpu:0,batch=1,tf32=off device=gpu:0,batch=1,scope=fresh; do
        configs+=(--config "$prefix$spec")
    done
    # XLA: TensorFlow's jit_compile and JAX's jax.jit; PyTorch has none (refused, one line).
    if [ "$runtime" != torch ]; then
        configs+=(--config "${prefix}device=gpu:0,batch=1,xla=on")
    fi
done

# The prediction: TF32 emulated on this CPU under each Keras runtime here, beside its plain
# float32 run (on a GPU machine the loop above has that run already).
for runtime in $runtimes; do
    case $runtime in tensorflow|jax|torch) ;; *) continue ;; esac
    [ -z "$reference" ] && reference=$( [ "$runtime" = tensorflow ] && echo "cpu b1" || echo "$runtime cpu b1")
    [ -z "$gpu" ] && configs+=(--config "runtime=$runtime,device=cpu,batch=1")
    configs+=(--config "runtime=$runtime,device=cpu,batch=1,emulate=tf32")
done

set +e
segdiff run "$MODEL" "$IMAGES" "${configs[@]}" --repeats "$repeats" --cache "$CACHE" --timeout 1200
status=$?
set -e
echo "segdiff run exited with $status"
segdiff bundle "$OUT/gpu-check.h5" --cache "$CACHE"
segdiff compare --cache "$CACHE" --ref "$reference"
segdiff diagnose --cache "$CACHE" --ref "$reference"
segdiff compare --cache "$CACHE" --ref "$reference" --json > "$OUT/compare.json"
echo "bundle: $OUT/gpu-check.h5; comparisons: $OUT/compare.json"
echo "TF32: predicted on this CPU (emulated) against measured on the GPU"
"$PY" tools/tf32_check.py "$CACHE"
