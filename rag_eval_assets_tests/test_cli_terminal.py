"""`rag-eval run` as a user starts it outside make (no DAGSTER_HOME, a configuration in its own directory): a
Dagster home beside the configuration, said once; a failed run's story on stdout, its first line what failed and
why, no asset that did not run called up to date, and on stderr nothing but rag-eval's own progress and notices (no
Dagster log line, no stack trace); the whole log in the run directory (and on the terminal with --verbose); no
progress bars or telemetry banner."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rag_eval_assets.cli import build_parser
from rag_eval_assets.defs.run_log import LOG_FILE
from rag_eval_assets.runs.listing import list_runs
from rag_eval_assets_tests.sample_config import REPO, SAMPLE_EVALSET, write_sample_config
from rag_eval_assets_tests.synthetic_beir import write_collection
from rag_eval_assets_tests.waiting import run_to_end

NOTICE = "rag-eval: DAGSTER_HOME is not set: using "
TELEMETRY_BANNER = "we collect usage statistics"  # Dagster's banner on the first run of a home with telemetry on
NOISE = ("Loading weights", "%|", TELEMETRY_BANNER, "Traceback", "dagster._core", "Stack Trace")
# What rag-eval itself writes on stderr without --verbose: each run's outcome and checks as it ends, and its notices.
OWN_STDERR = re.compile(r"^(\S+( \[\S+\])?: (succeeded|FAILED) \(run [0-9a-f-]{36}\)|  check \S+ (passed|FAILED)|"
                        r"rag-eval: .+)$")


def _not_ours(stderr: str) -> list[str]:
    """The lines of `stderr` that rag-eval did not write itself (a Dagster log line, a traceback)."""
    return [line for line in stderr.splitlines() if not OWN_STDERR.match(line)]


def _listing(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"^  (\S+)\s+(materialized.*|up to date|not run.*|FAILED.*)$", stdout, flags=re.M))


def _config(directory: Path, collection: Path, k1: float, b: float) -> Path:
    path = directory / f"k1_{k1}.yaml"
    path.write_text(
        f"storage_dir: {directory / 'store'}\n"
        f"corpus: {{id: synthetic, path: {collection}, language: en}}\n"
        f"evalset: {{name: synthetic, path: {collection}}}\n"
        "chunking: {chunk_size_chars: 100000, overlap_chars: 0}\n"
        "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n"
        f"retrieval: {{level: doc, bm25: {{k1: {k1}, b: {b}}}}}\n",
        encoding="utf-8",
    )
    return path


def _rag_eval(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`rag-eval ARGS` in `cwd`, waited for until it ends (a hang, not a slow machine, fails it: waiting.py)."""
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    return run_to_end([sys.executable, "-m", "rag_eval_assets.cli", *args], cwd=cwd, env=env)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs into one store from a directory of their own: the default BM25 with --verbose (options after the
    command), then BM25 broken on purpose (options before it), which fails the quality gate."""
    tmp = tmp_path_factory.mktemp("terminal")
    collection = write_collection(tmp / "beir")
    good = _rag_eval("run", "--config", str(_config(tmp, collection, 0.9, 0.4)), "--verbose", cwd=tmp)
    broken = _rag_eval("--config", str(_config(tmp, collection, 0.05, 0.0)), "run", cwd=tmp)
    return tmp, good, broken


def test_a_dagster_home_beside_the_configuration_said_once(runs):
    tmp, good, broken = runs
    assert good.returncode == 0, good.stderr[-3000:]
    home = tmp / ".dagster_home"
    for run in (good, broken):
        assert run.stderr.count(NOTICE) == 1 and f"{NOTICE}{home}\n" in run.stderr
    instance = yaml.safe_load((home / "dagster.yaml").read_text(encoding="utf-8"))
    assert instance["telemetry"] == {"enabled": False}  # the project's settings, copied
    assert instance["concurrency"]["pools"]["default_limit"] == 1
    assert (home / "history" / "runs.db").is_file()  # the runs were recorded there


def test_a_failed_gate_says_why_where_and_exits_1_without_a_stack_trace(runs):
    tmp, _, broken = runs
    assert broken.returncode == 1
    terminal = broken.stdout + broken.stderr
    assert not [noise for noise in NOISE if noise in terminal], terminal
    # The first line says what failed and why (whole: it is not repeated below); no Dagster line on stderr.
    assert broken.stdout.splitlines()[0].startswith(
        "run failed (exit 1): check run_comparison:quality_gate failed: worse: bm25@1: ndcg@k delta"), broken.stdout
    assert broken.stdout.count("quality_gate failed") == 1
    assert not _not_ours(broken.stderr), broken.stderr
    newest = list_runs(tmp / "store" / "runs")[0]
    comparison = json.loads((newest / "comparison.json").read_text(encoding="utf-8"))
    assert comparison["verdict"] == "worse"
    assert f"run directory: {newest}\n" in broken.stdout
    assert f"report: {newest / 'report.html'}\n" in broken.stdout and (newest / "report.html").is_file()
    assert f"log: {newest / LOG_FILE}\n" in broken.stdout
    assert len(terminal.splitlines()) < 40  # one line per asset and check, the reason, and where to look


def test_the_log_in_the_run_directory_holds_every_step_event_and_the_stack_trace(runs):
    tmp, _, _ = runs
    first, newest = list_runs(tmp / "store" / "runs")[1], list_runs(tmp / "store" / "runs")[0]
    first_log = (first / LOG_FILE).read_text(encoding="utf-8")
    for step in ("evalset", "chunks", "bm25_index"):
        assert f" {step} STEP_START - " in first_log and f" {step} STEP_SUCCESS - " in first_log
    # The broken run changed bm25's parameters only: its log holds the steps it re-ran, and no input step.
    log = (newest / LOG_FILE).read_text(encoding="utf-8")
    for step in ("retriever_config", "retrieval_results", "answers", "evaluation_run"):
        assert f" {step} STEP_START - " in log and f" {step} STEP_SUCCESS - " in log
    assert " chunks STEP_START - " not in log
    assert " run_comparison STEP_FAILURE - " in log and " - PIPELINE_FAILURE - " in log
    assert "DagsterAssetCheckFailedError" in log and "Stack Trace:" in log
    assert "Asset check 'quality_gate' on 'run_comparison' did not pass" in log
    assert " DEBUG " in log and " INFO alembic" in log  # Dagster's debug events, the libraries' INFO lines


def test_verbose_shows_the_log_on_the_terminal(runs):
    tmp, good, _ = runs
    first = list_runs(tmp / "store" / "runs")[1]
    log = (first / LOG_FILE).read_text(encoding="utf-8").splitlines()
    # Every line of the log, in its order, among the terminal's lines (which also hold what rag-eval prints).
    terminal = iter(good.stderr.splitlines())
    missing = [line for line in log if line not in terminal]
    assert len(log) > 100 and not missing, missing[:5]
    terminal = good.stdout + good.stderr
    assert not [noise for noise in ("Loading weights", "%|", TELEMETRY_BANNER) if noise in terminal]
    assert f"run directory: {first}\n" in good.stdout


def test_an_input_error_names_file_line_and_field_and_exits_2(tmp_path):
    lines = SAMPLE_EVALSET.read_text(encoding="utf-8").splitlines()[:3]
    second = json.loads(lines[1])
    second["question"] = 42
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text("\n".join([lines[0], json.dumps(second), lines[2]]) + "\n", encoding="utf-8")
    config = write_sample_config(tmp_path, "retrievers: [bm25]\nk_values: [1, 5]\nanswering: {k_values: [5]}\n",
                                 evalset=evalset)
    run = _rag_eval("run", "--config", str(config), cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    terminal = run.stdout + run.stderr
    assert not [noise for noise in NOISE if noise in terminal], terminal
    assert run.stdout.splitlines()[0] == (f"run failed (exit 2): preflight: 1 problem(s) in input: - {evalset}:2: "
                                          "field 'question': expected a string, got number")
    assert not _not_ours(run.stderr), run.stderr
    listing = _listing(run.stdout)
    assert re.fullmatch(r"FAILED in run [0-9a-f-]{36}", listing["preflight"])
    assert listing["evalset"] == "not run: missing"
    assert "up to date" not in listing.values(), listing  # nothing was ever materialized
    (log,) = (tmp_path / "store" / "runs").glob("failed-*.log")  # no run directory: the log beside the runs
    assert f"log: {log}\n" in run.stdout
    text = log.read_text(encoding="utf-8")
    assert " preflight STEP_FAILURE - " in text
    # The log ends with why the run failed, as the terminal said it.
    why = text.split(" ERROR rag_eval: run failed: preflight: ")[1]
    assert why.endswith(f"1 problem(s) in input:\n  - {evalset}:2: field 'question': expected a string, got number\n")


def test_a_step_that_raises_says_its_error_first_and_nothing_after_it_is_up_to_date(tmp_path, monkeypatch, capsys):
    """A forced run whose retrieval step fails with the error a full disk raises: the first line is the step and its
    error, and the answers and metrics it never got to are not called up to date, though Dagster calls them fresh
    (the first run's, whose inputs the forced run rewrote unchanged)."""
    from rag_eval_assets.cli import main
    from rag_eval_assets.defs.retrieval import assets

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    config = _config(tmp_path, write_collection(tmp_path / "beir"), 0.9, 0.4)
    assert main(["--config", str(config), "run"]) == 0

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(assets, "run_retriever", full_disk)
    capsys.readouterr()
    assert main(["--config", str(config), "run", "--force"]) == 1
    out = capsys.readouterr()
    assert out.out.splitlines()[0] == "run failed (exit 1): retrieval_results: [Errno 28] No space left on device"
    assert not _not_ours(out.err), out.err
    listing = _listing(out.out)
    assert listing["chunks"].startswith("materialized")
    assert re.fullmatch(r"FAILED in run [0-9a-f-]{36}", listing["retrieval_results[bm25]"])
    assert listing["answers[5|bm25]"] == listing["evaluation_run"] == "not run: the pipeline stopped before it"
    (log,) = (tmp_path / "store" / "runs").glob("failed-*.log")
    assert "ERROR rag_eval: run failed: retrieval_results: [Errno 28] No space left on device" in \
        log.read_text(encoding="utf-8")


COMMANDS = {
    "run": [], "evaluate": ["--corpus", "c", "--evalset", "e", "--out", "o"],
    "score": ["--evalset", "e", "--answers", "a", "--out", "o"], "compare": ["--base", "b", "--cand", "c"],
    "history": [], "baseline accept": ["RUN"], "baseline show": [], "benchmark": ["--config-file", "b", "--out", "o"],
    "backfill": [], "nightly": [], "label": ["--evalset", "e"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_global_options_go_before_or_after_every_command(command):
    parser = build_parser()
    words = [*command.split(), *COMMANDS[command]]
    before = parser.parse_args(["--config", "x.yaml", "--verbose", *words])
    after = parser.parse_args([*words, "--config", "x.yaml", "--verbose"])
    neither = parser.parse_args(words)
    assert (before.config, before.verbose) == (after.config, after.verbose) == ("x.yaml", True)
    assert (neither.config, neither.verbose) == (None, False)
    assert parser.parse_args(["--config", "a.yaml", *words, "--config", "b.yaml"]).config == "b.yaml"
