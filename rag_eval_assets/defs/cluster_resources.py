"""What a step asks of the dask worker that executes it (execution.dask): dagster-dask's resource requirements op
tag, matched against `dask worker --resources "GPU=1"`. A step tagged with a resource no worker has waits for one."""

from __future__ import annotations

import json

from rag_eval_assets.settings import Settings

# dagster_dask.executor.DASK_RESOURCE_REQUIREMENTS_KEY, not imported: every Dagster process imports the assets, and
# dagster-dask only where a cluster is configured.
RESOURCE_REQUIREMENTS_TAG = "dagster-dask/resource_requirements"


def encode_op_tags(settings: Settings, device: str) -> dict[str, str]:
    """An encode step on `device` asks for a GPU worker when it runs on a cluster and the device is cuda."""
    if settings.execution.dask is None or not device.startswith("cuda"):
        return {}
    return {RESOURCE_REQUIREMENTS_TAG: json.dumps({"GPU": 1})}
