"""Machines' published limits: presets.json, each well-known machine's memory bandwidth and
peak math per precision with the public source of each figure, and the names its devices report;
and which of them names a device a run measured. Read by the predictions (predicting/presets.py)
and by the measuring, which sizes a GPU's workbench from its datasheet."""
import json
import os

PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "presets.json")


def known():
    """{name: entry} of presets.json: each with "title", "kind", "forklift": [GB/s, source] and
    "workbench": {precision: [GFLOP/s, source]}."""
    with open(PRESETS, encoding="utf-8") as f:
        return json.load(f)["machines"]


def preset_name(device):
    """The preset whose device_names hold the name a device reports ({"name": ...}), or None."""
    said = spaced((device or {}).get("name"))
    return next((n for n, e in known().items()
                 if said in {spaced(d) for d in e.get("device_names", ())}), None)


def variants():
    """{a driver's name: [the preset it is near, how it differs]} of presets.json."""
    with open(PRESETS, encoding="utf-8") as f:
        return json.load(f).get("variants", {})


def spaced(name):
    """A device's name as matched: lower case, single spaces."""
    return " ".join(str(name or "").lower().split())
