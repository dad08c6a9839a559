#!/usr/bin/env bash
# Build the onedir bundle (dist/pyinstaller/segdiff/) in a virtual environment of its own,
# then run its smoke test: the window opens offscreen and one real inference runs through an
# engine child that is the bundle itself. Prints the build time and the bundle's size.
#
#   packaging/pyinstaller/build.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=build/pyinstaller
dist=dist/pyinstaller
started=$(date +%s)
if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
fi
"$work/venv/bin/pip" install -q . 'pyinstaller>=6.10' 'pyinstaller-hooks-contrib>=2024.8'
"$work/venv/bin/pyinstaller" --noconfirm --clean --log-level WARN \
    --workpath "$work/tmp" --distpath "$dist" packaging/pyinstaller/segdiff.spec
built=$(date +%s)
echo "built $dist/segdiff in $((built - started)) s; size $(du -sh "$dist/segdiff" | cut -f1)"
"$dist/segdiff/segdiff-gui" --version
(cd /tmp && "$OLDPWD/$dist/segdiff/segdiff-gui" --smoke-test)
"$dist/segdiff/segdiff-gui" --cli --version
echo "smoke test took $(($(date +%s) - built)) s"
