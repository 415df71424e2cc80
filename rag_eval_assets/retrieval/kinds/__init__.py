"""The registered retriever kinds. A new kind is one module here and one line below."""

from rag_eval_assets.retrieval.kinds import bm25, dense, http, hybrid
from rag_eval_assets.retrieval.registry import KINDS, register

for _module in (bm25, dense, hybrid, http):
    register(_module.KIND)

__all__ = ["KINDS"]
