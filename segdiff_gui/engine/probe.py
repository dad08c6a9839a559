"""``python -m segdiff_gui.engine probe``: devices and build facts, one ProbeAnswer."""

from __future__ import annotations

from segdiff_gui.core.protocol import ProbeAnswer
from segdiff_gui.engine.protocol import Channel


def main(channel: Channel) -> int:
    from segdiff_gui.engine.facts import device_facts, process_facts

    channel.send(ProbeAnswer(device_facts(), process_facts()))
    return 0
