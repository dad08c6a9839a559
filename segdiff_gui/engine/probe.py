"""``python -m segdiff_gui.engine probe``: devices and build facts as one JSON line."""

from __future__ import annotations

import json

from segdiff_gui.engine.protocol import Channel


def main(channel: Channel) -> int:
    from segdiff_gui.engine.facts import device_facts, process_facts

    channel.write_raw(
        json.dumps({"event": "probe", "devices": device_facts(), "facts": process_facts()})
    )
    return 0
