"""`rag-eval label`: turning top-k chunks a person marks as gold into anchor labels (seed 002's label_eval.py).

Everything here but app.py is plain Python: the App only shows a LabelSession and forwards keys to it.
"""
