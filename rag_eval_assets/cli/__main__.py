"""`python -m rag_eval_assets.cli`, as the `rag-eval` entry point."""

import sys

from rag_eval_assets.cli import main

sys.exit(main())
