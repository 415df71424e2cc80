"""The verdict: paired tests between two runs, the joint correction across cells, intervals that agree with their
tests, the gate's settings and decision (with a person's grades: judged.py), and the ranking of one run's
retrievers with the confidence set of the best (best_set.py). Computation only: reports/ renders."""
