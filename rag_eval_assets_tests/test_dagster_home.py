"""The Dagster home is the user's when set (DAGSTER_HOME, for `rag-eval` and for `make run` / `make ui`), and a home
without a dagster.yaml gets the project's instance settings (deploy/dagster.yaml: no telemetry banner, no
community dialog) from whichever of them uses it first."""

from __future__ import annotations

import os
import shutil
import subprocess

import dagster as dg
import pytest
import yaml

from rag_eval_assets.cli import main
from rag_eval_assets_tests.sample_config import REPO, write_sample_config

PROJECT_SETTINGS = REPO / "deploy" / "dagster.yaml"


def test_a_fresh_dagster_home_gets_the_project_settings_and_a_home_of_its_own_keeps_them(tmp_path, monkeypatch,
                                                                                       capsys):
    home = tmp_path / "home"
    home.mkdir()  # empty, as a user creates it before pointing DAGSTER_HOME at it
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # An unset key variable: preflight fails the first run, so the test runs nothing else.
    monkeypatch.delenv("RAG_TEST_ABSENT_KEY", raising=False)
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
                                 "llm: {base_url: 'http://127.0.0.1:9/v1', model: m, api_key_env: RAG_TEST_ABSENT_KEY}\n")

    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"rag-eval: {home} had no dagster.yaml: wrote the project's instance settings" in err
    assert "DAGSTER_HOME is not set" not in err  # it was: the user's home is used, not one beside the config
    assert (home / "dagster.yaml").read_text(encoding="utf-8") == PROJECT_SETTINGS.read_text(encoding="utf-8")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert (instance.telemetry_enabled, instance.nux_enabled) == (False, False)
        assert [run.job_name for run in instance.get_runs()] == ["inputs_job"]  # the run was recorded there
    assert not (tmp_path / ".dagster_home").exists()

    # A home with a dagster.yaml of its own keeps it, and nothing is said.
    own = "telemetry:\n  enabled: false\nrun_monitoring:\n  enabled: false\n"
    (home / "dagster.yaml").write_text(own, encoding="utf-8")
    assert main(["run", "--config", str(config)]) == 2
    assert "dagster.yaml" not in capsys.readouterr().err
    assert yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8")) == yaml.safe_load(own)


def _make_dry_run(target: str, **variables: str) -> list[str]:
    """The commands `make -n target` would run, with `variables` in its environment (and no other DAGSTER_HOME or
    RAG_EVAL_CONFIG)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAG_EVAL_CONFIG", "MAKEFLAGS")}
    out = subprocess.run(["make", "-n", target], cwd=REPO, env={**env, **variables}, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
def test_make_ui_and_run_use_the_dagster_home_and_configuration_the_user_set(tmp_path):
    home = tmp_path / "my_home"
    for target, program in (("ui", ".venv/bin/dagster dev -w workspace.yaml"), ("run", ".venv/bin/rag-eval run")):
        commands = _make_dry_run(target, DAGSTER_HOME=str(home))
        assert f"mkdir -p {home}" in commands and f"cp -n deploy/dagster.yaml {home}/dagster.yaml" in commands
        assert f"DAGSTER_HOME={home} RAG_EVAL_CONFIG={REPO / 'rag_eval.yaml'} {program}" in "\n".join(commands)

    # Another configuration and no DAGSTER_HOME: the home beside that configuration, as rag-eval picks outside make.
    other = tmp_path / "other" / "rag_eval.yaml"
    commands = "\n".join(_make_dry_run("ui", RAG_EVAL_CONFIG=str(other)))
    assert f"DAGSTER_HOME={other.parent / '.dagster_home'} RAG_EVAL_CONFIG={other} .venv/bin/dagster dev" in commands

    # Neither: the repository's own configuration and .dagster_home.
    commands = "\n".join(_make_dry_run("ui"))
    assert f"DAGSTER_HOME={REPO / '.dagster_home'} RAG_EVAL_CONFIG={REPO / 'rag_eval.yaml'} .venv/bin/dagster" in \
        commands
