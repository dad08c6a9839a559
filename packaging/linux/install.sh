#!/usr/bin/env bash
# Put segdiff's desktop entry, AppStream metadata and icons where Linux desktops find them.
#
#   packaging/linux/install.sh            # for this user: ~/.local/share
#   sudo packaging/linux/install.sh /usr/local/share
#   packaging/linux/install.sh --uninstall [DATA_DIR]
#
# segdiff-gui itself comes from pip (`pip install segdiff` or the wheel); the entry runs
# `segdiff-gui`, so it must be on the PATH the desktop session sees.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
icons="$here/../../segdiff_gui/resources/icons"
app_id="io.github.segdiff.Segdiff"
uninstall=0
if [ "${1:-}" = "--uninstall" ]; then uninstall=1; shift; fi
data="${1:-${XDG_DATA_HOME:-$HOME/.local/share}}"

files=("applications/$app_id.desktop" "metainfo/$app_id.metainfo.xml"
       "icons/hicolor/scalable/apps/$app_id.svg")
for size in 16 24 32 48 64 128 256 512; do
    files+=("icons/hicolor/${size}x${size}/apps/$app_id.png")
done

if [ "$uninstall" = 1 ]; then
    for file in "${files[@]}"; do rm -f "$data/$file"; done
    echo "removed segdiff's desktop files from $data"
else
    install -Dm644 "$here/$app_id.desktop" "$data/applications/$app_id.desktop"
    install -Dm644 "$here/$app_id.metainfo.xml" "$data/metainfo/$app_id.metainfo.xml"
    install -Dm644 "$icons/segdiff.svg" "$data/icons/hicolor/scalable/apps/$app_id.svg"
    for size in 16 24 32 48 64 128 256 512; do
        install -Dm644 "$icons/segdiff-$size.png" "$data/icons/hicolor/${size}x${size}/apps/$app_id.png"
    done
    echo "installed segdiff's desktop entry, metadata and icons into $data"
fi
# Refresh the caches where the tools exist; desktops also notice on their own after a while.
command -v update-desktop-database >/dev/null && update-desktop-database -q "$data/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$data/icons/hicolor" || true
