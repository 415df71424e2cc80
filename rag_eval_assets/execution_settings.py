"""rag_eval.yaml's `execution:` section: where the steps of the jobs that fan out execute (the encode steps of the
inputs, the retrieval grid, the answer grid). Absent, on the host, by the jobs' own executor; with `dask`, each step
as a task of that dask.distributed cluster, whichever way the run was launched (defs/executors.py).

The scheduler's address is written in the file or, for a deployment that keeps it out of the file, read from the
environment variable `address_env` names when a run starts, by the process that orchestrates the run (the workers
need not have it).
"""

from __future__ import annotations

import os
import re
from typing import Annotated

from pydantic import AfterValidator, Field, StrictStr

from rag_eval_assets.settings_base import Loc, Section, problem

# What dask.distributed's comm layer accepts as a scheduler address.
PROTOCOLS = ("tcp://", "tls://", "ucx://", "ws://", "wss://", "inproc://")


def _is_scheduler_address(address: str) -> bool:
    return address.startswith(PROTOCOLS) and address not in PROTOCOLS


def _scheduler_address(address: str) -> str:
    if not _is_scheduler_address(address):
        raise problem(f"must be a dask scheduler address such as tcp://10.0.0.5:8786 (protocols: "
                      f"{', '.join(p.removesuffix('://') for p in PROTOCOLS)})")
    return address


def _variable_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise problem("must be the name of an environment variable (letters, digits, _), e.g. RAG_EVAL_DASK")
    return name


class DaskSettings(Section):
    address: Annotated[StrictStr, AfterValidator(_scheduler_address)] | None = None  # tcp://host:8786
    address_env: Annotated[StrictStr, AfterValidator(_variable_name)] | None = None  # or the variable holding it
    # How long the scheduler has to answer before any run (infrastructure.py): a wrong address fails in seconds.
    connect_timeout_s: float = Field(5.0, gt=0, le=120)

    @classmethod
    def cross_field_problems(cls, data: dict) -> list[tuple[Loc, str]]:
        given = [key for key in ("address", "address_env") if data.get(key) is not None]
        if not given:
            return [(("address",), "required: the scheduler's address (tcp://host:8786), or address_env naming "
                                   "the environment variable that holds it")]
        if len(given) == 2:
            return [(("address_env",), "give address or address_env, not both")]
        return []

    def scheduler_address(self) -> str:
        """`address`, or the value of the variable `address_env` names, read now."""
        if self.address is not None:
            return self.address
        value = os.environ.get(self.address_env, "")
        if not _is_scheduler_address(value):
            why = "which is not set" if not value else "whose value is not a dask scheduler address (tcp://host:port)"
            raise ValueError(f"execution.dask.address_env names {self.address_env}, {why} in this run's environment")
        return value


class ExecutionSettings(Section):
    dask: DaskSettings | None = None  # None: every step executes on the host
