"""How far an LLM judge agrees with a person's grades (agreement.py), and the judge metric's mean rectified by those
grades with an honest interval (calibration.py). Plain functions over score arrays; the reports call them."""
