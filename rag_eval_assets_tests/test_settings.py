"""The configuration file: defaults, path resolution, and errors that name the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_eval_assets.errors import InputError
from rag_eval_assets.settings import load_settings

REPO = Path(__file__).resolve().parents[1]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "conf" / "rag_eval.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_configuration_loads_with_sample_paths():
    s = load_settings(REPO / "rag_eval.yaml")
    assert s.corpus.path == REPO / "data" / "sample" / "corpus"
    assert s.evalset.path == REPO / "data" / "sample" / "evalsets" / "eval_set.jsonl"
    assert s.retrievers == ("bm25", "dense", "hybrid")
    assert s.k_values == (1, 3, 5, 10, 20)
    assert s.assets_dir == str(REPO / "data" / "assets")


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    path = _write(tmp_path, "corpus: {id: c, path: docs}\nevalset: {name: e, path: q.jsonl}\nstorage_dir: out\n")
    s = load_settings(path)
    assert s.corpus.path == tmp_path / "conf" / "docs"
    assert s.storage_dir == str(tmp_path / "conf" / "out")
    assert s.chunking.chunk_size_chars == 800 and s.chunking.overlap_chars == 100


def test_object_store_url_is_kept_as_is(tmp_path):
    path = _write(tmp_path, "storage_dir: s3://bucket/rag\ncorpus: {id: c, path: d}\nevalset: {name: e, path: q}\n")
    s = load_settings(path)
    assert s.assets_dir == "s3://bucket/rag/assets"
    local = tmp_path / "conf" / "data"
    assert (s.frozen_dir, s.cache_dir, s.runs_dir) == (local / "frozen", local / "cache", local / "runs")


def test_every_problem_is_reported_with_its_key(tmp_path):
    path = _write(
        tmp_path,
        "corpus: {id: c}\n"
        "evalset: {name: e, path: q, colour: red}\n"
        "chunking: {chunk_size_chars: 100, overlap_chars: 100}\n"
        "retrievers: [bm25, splade]\n"
        "k_values: [0, 5]\n"
        "colour: blue\n",
    )
    with pytest.raises(InputError) as info:
        load_settings(path)
    found = {(p.file, p.field) for p in info.value.problems}
    assert found == {
        (str(path), "corpus.path"),
        (str(path), "evalset.colour"),
        (str(path), "chunking.overlap_chars"),
        (str(path), "retrievers[1]"),
        (str(path), "k_values"),
        (str(path), "colour"),
    }
    assert "splade" in str(info.value)


def test_invalid_yaml_names_the_line(tmp_path):
    path = _write(tmp_path, "corpus:\n  id: c\n  path: [unclosed\n")
    with pytest.raises(InputError) as info:
        load_settings(path)
    (problem,) = info.value.problems
    assert problem.file == str(path) and problem.line is not None and problem.line >= 3


def test_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match="configuration file not found"):
        load_settings(tmp_path / "absent.yaml")


def test_llm_and_answer_sections(tmp_path):
    path = _write(
        tmp_path,
        "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\nk_values: [5, 10]\n"
        "llm: {base_url: 'http://127.0.0.1:8080/v1', model: smol, api_key_env: MY_KEY,"
        " price_per_1k: {smol: [0.001, 0.002]}}\n"
        "answering: {answerer: llm, k_values: [10, 5]}\njudge: {replicates: 2}\n",
    )
    s = load_settings(path)
    assert s.llm.model == "smol" and s.llm.api_key_env == "MY_KEY" and s.llm.price == (0.001, 0.002)
    assert s.answering.answerer == "llm" and s.answering.k_values == (5, 10)
    assert s.judge.enabled and s.judge.replicates == 2
    assert load_settings(REPO / "rag_eval.yaml").llm is None  # the shipped configuration runs offline


def test_answer_grid_problems_name_their_keys(tmp_path):
    path = _write(
        tmp_path,
        "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\nk_values: [5]\n"
        "llm: {model: smol, schema_mode: xml}\nanswering: {answerer: http, k_values: [10]}\n",
    )
    with pytest.raises(InputError) as info:
        load_settings(path)
    assert {p.field for p in info.value.problems} == {
        "llm.base_url", "llm.schema_mode", "answering.answerer", "answering.k_values"
    }


def test_report_gate_settings(tmp_path):
    from rag_eval_assets.runs.gate import GateSettings

    base = "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\n"
    assert load_settings(_write(tmp_path, base)).report.gate == GateSettings()
    gate = load_settings(_write(tmp_path, base + "report:\n  gate: {metric: hit@k, min_delta: -0.01, "
                                "max_regressions: 2, alpha: 0.01, correction: bonferroni, "
                                "significant_only: false}\n")).report.gate
    assert gate == GateSettings(metric="hit@k", min_delta=-0.01, max_regressions=2, alpha=0.01,
                                correction="bonferroni", significant_only=False)
    with pytest.raises(InputError) as info:
        load_settings(_write(tmp_path, base + "report:\n  gate: {correction: fdr, significant_only: maybe, "
                             "min_delta: x, primary_metric: hit@k}\n"))
    problems = {p.field: p.message for p in info.value.problems}
    assert problems == {
        "report.gate.correction": "'fdr' is not one of holm, bonferroni, none",
        "report.gate.significant_only": "wrong type str",
        "report.gate.min_delta": "wrong type str",
        "report.gate.primary_metric": "unknown key; valid keys: metric, retrieval_metric, min_delta, "
                                      "max_regressions, alpha, correction, significant_only",
    }
    with pytest.raises(InputError) as info:
        load_settings(_write(tmp_path, base + "report:\n  gate: {alpha: 1.5, max_regressions: -1}\n"))
    assert {p.field: p.message for p in info.value.problems} == {
        "report.gate.alpha": "must be between 0 and 1, got 1.5",
        "report.gate.max_regressions": "must be >= 0, got -1",
    }


def test_alert_and_retention_problems_name_their_keys(tmp_path):
    path = tmp_path / "rag_eval.yaml"
    path.write_text(
        "corpus: {id: c, path: .}\nevalset: {name: e, path: e.jsonl}\n"
        "alerts: {on: [worse, sometimes]}\nretention: {keep_runs: 0}\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_settings(path)
    fields = {p.field: p.message for p in error.value.problems}
    assert fields == {
        "alerts.webhook_url_env": "required: the name of the environment variable holding the webhook URL",
        "alerts.on[1]": "'sometimes' is not one of worse, incompatible, failed",
        "retention.keep_runs": "must be >= 1 (or null: keep every run), got 0",
    }


def test_http_base_url_keeps_its_query_and_parts_that_could_not_be_kept_are_errors(tmp_path):
    head = "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\nretrievers: [http]\n"
    good = _write(tmp_path, head + "retrieval: {http: {base_url: 'https://rag.example/t1/?token=abc', "
                  "api_key_env: SUT_KEY, headers_env: SUT_HEADERS}}\n")
    http = load_settings(good).retrieval.http
    assert (http.base_url, http.api_key_env, http.headers_env) == ("https://rag.example/t1/?token=abc", "SUT_KEY",
                                                                   "SUT_HEADERS")
    bad = _write(tmp_path, head + "retrieval: {http: {base_url: 'https://rag.example/?debug=false#token=abc', "
                 "path: '/ask?v=2', headers_env: 3}}\n")
    with pytest.raises(InputError) as info:
        load_settings(bad)
    assert [(p.field, p.message) for p in info.value.problems] == [
        ("retrieval.http.headers_env", "wrong type int"),
        ("retrieval.http.base_url", "has a fragment (#...), which is never sent to the server"),
        ("retrieval.http.base_url", "sets `debug` in its query; the client sends debug=true itself"),
        ("retrieval.http.path", "must be a path only; put query parameters on base_url, where they are kept"),
    ]
