"""rag-eval-assets: RAG evaluation as Dagster software-defined assets."""
