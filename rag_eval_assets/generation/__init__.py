"""Query generation (seed 004), answerers (LLM, extractive, HTTP), LLM judges and abstention (seed 002)."""
