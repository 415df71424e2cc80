"""The cluster and the store are checked before any run, whether or not anything is stale (defs/infrastructure.py),
as an operator meets them from the command line: a scheduler address where nothing listens, an `address_env` unset
or holding no address, a bucket that does not exist, credentials the store refuses (moto's server, checking every
request's signature) and a store endpoint that does not answer. Each is one line on stderr, exit 2, the checks well
within 15 s (timed in process: the command's own start is slow on a loaded machine, and printed beside), no
traceback, no secret, and nothing created: no bucket, no Dagster run, no table, no run directory."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from rag_eval_assets.cli import main
from rag_eval_assets.defs.infrastructure import PROBES, check_infrastructure
from rag_eval_assets.errors import InfrastructureError
from rag_eval_assets.settings import load_settings
from rag_eval_assets_tests.dagster_server import BIN, free_port
from rag_eval_assets_tests.s3_server import s3_server
from rag_eval_assets_tests.sample_config import write_sample_config
from rag_eval_assets_tests.waiting import run_to_end

GRID = "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
PREFIX = "team/eval"
WITHIN_S = 15.0
ADDRESS_ENV = "RAG_EVAL_TEST_DASK"


@pytest.fixture(scope="module")
def s3():
    with s3_server(signed=True) as server:
        server.create_bucket("tables")
        yield server


def _config(directory: Path, extra: str = "", bucket: str | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = write_sample_config(directory, GRID + extra)
    if bucket is not None:
        text = config.read_text(encoding="utf-8").replace(f"storage_dir: {directory / 'store'}",
                                                          f"storage_dir: s3://{bucket}/{PREFIX}")
        config.write_text(text, encoding="utf-8")
    return config


def _checked_in(env: dict[str, str], config: Path) -> float:
    """Seconds the checks take in this process, in environment `env`: the command's own start (its imports, slow on
    a loaded machine) left out."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        started = time.monotonic()
        with pytest.raises(InfrastructureError):
            check_infrastructure(load_settings(config))
        return time.monotonic() - started
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _refused(config: Path, env: dict[str, str], command: str = "run") -> tuple[str, float]:
    """`rag-eval <command>` on `config`: its one line on stderr and the seconds the checks took, once the refusal is
    checked (exit 2, one line, no traceback, nothing written beside the configuration)."""
    env = {**env, "DAGSTER_HOME": str(config.parent / "home")}
    started = time.monotonic()
    done = run_to_end([str(BIN / "rag-eval"), "--config", str(config), command], cwd=config.parent, env=env)
    seconds, checks = time.monotonic() - started, _checked_in(env, config)
    print(f"\n{command} refused after {seconds:.1f} s (the checks: {checks:.1f} s): {done.stderr.strip()}")
    assert done.returncode == 2, done.stdout + done.stderr
    assert checks < WITHIN_S
    assert "Traceback" not in done.stderr and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ")
    assert sorted(p.name for p in config.parent.iterdir() if not p.name.startswith(".")) == ["rag_eval.yaml"]
    return line, seconds


def test_a_scheduler_where_nothing_listens_is_refused_in_seconds(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    config = _config(tmp_path, f"execution: {{dask: {{address: '{address}', connect_timeout_s: 3}}}}\n")
    line, _ = _refused(config, dict(os.environ))
    assert line == (f"error: execution.dask.address: the dask scheduler at {address} did not answer within 3 s "
                    "(execution.dask.connect_timeout_s)")
    # `rag-eval nightly` checks the same before it queues a night.
    assert _refused(config, dict(os.environ), "nightly")[0] == line


def test_an_address_env_unset_or_holding_no_address_is_refused(tmp_path):
    config = _config(tmp_path, f"execution: {{dask: {{address_env: {ADDRESS_ENV}}}}}\n")
    env = {k: v for k, v in os.environ.items() if k != ADDRESS_ENV}
    assert _refused(config, env)[0] == (f"error: execution.dask.address_env names {ADDRESS_ENV}, which is not set "
                                        "in this run's environment")
    assert _refused(config, {**env, ADDRESS_ENV: "10.0.0.5:8786"})[0] == (
        f"error: execution.dask.address_env names {ADDRESS_ENV}, whose value is not a dask scheduler address "
        "(tcp://host:port) in this run's environment")


def test_a_missing_bucket_is_refused_and_never_created(s3, tmp_path):
    config = _config(tmp_path, bucket="no-such-bucket")
    line, _ = _refused(config, s3.env())
    assert line == (f"error: storage_dir s3://no-such-bucket/{PREFIX} (endpoint {s3.endpoint}, bucket "
                    "no-such-bucket): the bucket does not exist; a run never creates one: create it first "
                    "(docs/deployment.md, Storage on S3)")
    assert [b["Name"] for b in s3.client().list_buckets()["Buckets"]] == ["tables"]


def test_a_store_that_does_not_answer_is_refused(tmp_path):
    config = _config(tmp_path, bucket="tables")
    dead = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "AWS_ENDPOINT_URL": dead, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_DEFAULT_REGION": "us-east-1"}
    line, _ = _refused(config, env)
    assert line.startswith(f"error: storage_dir s3://tables/{PREFIX} (endpoint {dead}, bucket tables): ")
    # Refused connections are retried (by botocore and s3fs) until they give up, or STORE_TIMEOUT_S passes.
    assert "checking that bucket tables exists" in line and ("Could not connect" in line or "no answer" in line)


def test_refused_credentials_stop_even_a_run_with_nothing_stale_and_change_nothing(s3, tmp_path, monkeypatch,
                                                                                   capsys):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    config = _config(tmp_path / "good", bucket="tables")
    assert main(["--config", str(config), "run"]) == 0
    assert main(["--config", str(config), "run"]) == 0  # nothing stale: no run
    capsys.readouterr()
    stored = s3.objects("tables")
    assert stored and not any(key.startswith(f"{PREFIX}/{PROBES}/") for key in stored)  # the probes were removed

    wrong = "not-the-secret-key"
    line, _ = _refused(_config(tmp_path / "wrong", bucket="tables"),
                             {**s3.env(), "AWS_SECRET_ACCESS_KEY": wrong})
    assert line == (f"error: storage_dir s3://tables/{PREFIX} (endpoint {s3.endpoint}, bucket tables): the "
                    "credentials are refused (Forbidden) while checking that bucket tables exists")
    assert wrong not in line and s3.secret not in line
    # The same configuration, nothing stale, with the secret wrong: refused before any run, not one byte changed.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", wrong)
    assert main(["--config", str(config), "run"]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
    assert s3.objects("tables") == stored
