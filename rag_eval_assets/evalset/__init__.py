"""Evaluation sets: one schema for every seed format and BEIR, loading, validation, freezing, subsets."""
