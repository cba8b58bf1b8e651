"""Knob families, one module each. A new family is one module plus one line here (``name: "module:Class"``);
the order here is only the order of the report when the families' ``after`` leaves a choice."""

from tuner.report import by_family
from tuner.families.base import Registry

REGISTRY = Registry({
    "readahead": "tuner.families.readahead:Readahead",
    "concurrency": "tuner.families.concurrency:Concurrency",
    "wal": "tuner.families.wal:Wal",
    "replay": "tuner.families.replay:Replay",
})

# The policy and the report (below this layer) split their families' tables and keys by what the families declare.
by_family.install(REGISTRY)
