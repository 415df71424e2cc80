"""The registered evalset formats: one record parser per seed format, and BEIR, a directory, with a loader of its
own. A new format is one module here and one line below (evalset/registry.py says what a module declares)."""

from rag_eval_assets.evalset.formats import beir, seed000, seed001, seed002, seed003, seed004
from rag_eval_assets.evalset.registry import FORMATS, register

for _module in (seed000, seed001, seed002, seed003, seed004, beir):
    register(_module.FORMAT)

__all__ = ["FORMATS"]
