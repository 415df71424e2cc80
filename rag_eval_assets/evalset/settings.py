"""The evalset part of rag_eval.yaml: `evalset:` (which file, in which format) and `dev_subset:`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import StrictBool, StrictInt, StrictStr

from rag_eval_assets.evalset.formats import FORMATS
from rag_eval_assets.settings_base import ConfigPath, Section, at_least


class EvalsetSettings(Section):
    name: StrictStr
    path: ConfigPath
    format: Literal[*FORMATS] | None = None  # None: detected
    strict_gold: StrictBool = False


class DevSubsetSettings(Section):
    size: Annotated[StrictInt, at_least(0)] = 100
    seed: StrictInt = 0
