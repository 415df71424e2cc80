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
    assert (s.judge.trust_kappa, s.judge.min_grades) == (0.4, 10)
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
    from rag_eval_assets.verdict.settings import GateSettings

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
        "report.gate.correction": "'fdr' is not one of joint, holm, bonferroni, none",
        "report.gate.significant_only": "wrong type str",
        "report.gate.min_delta": "wrong type str",
        "report.gate.primary_metric": "unknown key; valid keys: metric, retrieval_metric, min_delta, "
                                      "max_regressions, alpha, correction, significant_only, max_error_rate, "
                                      "retrievers, calibrated, top_questions",
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


BASE = "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\n"


def _problems(tmp_path: Path, text: str) -> dict[str, str]:
    with pytest.raises(InputError) as info:
        load_settings(_write(tmp_path, BASE + text))
    found = {p.field: p.message for p in info.value.problems}
    assert len(found) == len(info.value.problems), "one problem per key"
    return found


def test_ranges_and_choices_that_once_failed_at_run_time_fail_at_load_naming_the_dotted_key(tmp_path):
    assert _problems(
        tmp_path,
        "corpus: {id: c, path: d, language: fr}\nevalset: {name: e, path: q, format: csv}\n"
        "dev_subset: {size: -1}\n"
        "retrieval:\n  level: page\n  bm25: {k1: -0.5, b: 1.5, variant: robertson}\n"
        "  hybrid: {method: sum, rrf_k: -1, alpha: 2, candidate_depth: 0}\n"
        "  http: {connect_timeout: 0, read_timeout: -1, max_attempts: 0}\n"
        "llm: {base_url: 'http://h/v1', model: m, max_error_rate: 2, max_tokens: 0,"
        " retry: {max_attempts: 0, base_delay: -1}}\n"
        "judge: {replicates: -1, trust_kappa: 1.5, min_grades: 0}\nquery_generation: {n_chunks: 0}\n"
        "report: {gate: {max_error_rate: 1.5, alpha: 0}}\n"
        "answering: {citation_pattern: '(unclosed'}\n",
    ) == {
        "corpus.language": "'fr' is not one of en, ru, zh, multi, auto",
        "evalset.format": "'csv' is not one of seed000, seed001, seed002, seed003, seed004, beir",
        "dev_subset.size": "must be >= 0, got -1",
        "retrieval.level": "'page' is not one of chunk, doc",
        "retrieval.bm25.k1": "must be >= 0, got -0.5",
        "retrieval.bm25.b": "must be between 0 and 1, got 1.5",
        "retrieval.bm25.variant": "'robertson' is not one of lucene, okapi, atire",
        "retrieval.hybrid.method": "'sum' is not one of rrf, convex",
        "retrieval.hybrid.rrf_k": "must be >= 0, got -1",
        "retrieval.hybrid.alpha": "must be between 0 and 1, got 2.0",
        "retrieval.hybrid.candidate_depth": "must be >= 1, got 0",
        "retrieval.http.connect_timeout": "must be > 0, got 0.0",
        "retrieval.http.read_timeout": "must be > 0, got -1.0",
        "retrieval.http.max_attempts": "must be >= 1, got 0",
        "llm.max_error_rate": "must be between 0 and 1, got 2.0",
        "llm.max_tokens": "must be >= 1, got 0",
        "llm.retry.max_attempts": "must be >= 1, got 0",
        "llm.retry.base_delay": "must be >= 0 (delays are seconds), got -1.0",
        "judge.replicates": "must be >= 0, got -1",
        "judge.trust_kappa": "must be between -1 and 1, got 1.5",
        "judge.min_grades": "must be >= 1, got 0",
        "query_generation.n_chunks": "must be >= 1, got 0",
        "report.gate.max_error_rate": "must be between 0 and 1, got 1.5",
        "report.gate.alpha": "must be between 0 and 1, got 0.0",
        "answering.citation_pattern": "not a regular expression: missing ), unterminated subpattern at position 0",
    }


def test_types_are_strict_a_bool_is_not_a_number_and_a_string_is_not_one(tmp_path):
    assert _problems(
        tmp_path,
        "chunking: {chunk_size_chars: true, overlap_chars: '10'}\nretrievers: bm25\nk_values: [5, '10']\n"
        "retrieval: {folder_filter: 1, bm25: {k1: '0.9'}, dense: 7}\njudge: 3\nstorage_dir: 5\n",
    ) == {
        "chunking.chunk_size_chars": "wrong type bool",
        "chunking.overlap_chars": "wrong type str",
        "retrievers": "wrong type str",
        "k_values[1]": "wrong type str",
        "retrieval.folder_filter": "wrong type int",
        "retrieval.bm25.k1": "wrong type str",
        "retrieval.dense": "expected a mapping, got int",
        "judge": "expected a mapping, got int",
        "storage_dir": "wrong type int",
    }
    # An integer is a number: k1: 1 is 1.0.
    s = load_settings(_write(tmp_path, BASE + "retrieval: {bm25: {k1: 1, b: 1}}\nk_values: [10, 5, 10]\n"))
    assert (s.retrieval.bm25.k1, s.retrieval.bm25.b, s.k_values) == (1.0, 1.0, (5, 10))


def test_unknown_keys_list_the_valid_ones_and_missing_sections_are_named(tmp_path):
    with pytest.raises(InputError) as info:
        load_settings(_write(tmp_path, "evalset: {name: e, path: q}\nretrieval: {bm25: {k3: 1}, dense: {devices: cpu}}\n"
                                       "llm: {base_url: 'http://h/v1', model: m, retry: {tries: 2}}\n"))
    assert {p.field: p.message for p in info.value.problems} == {
        "corpus": "required section is missing",
        "retrieval.bm25.k3": "unknown key; valid keys: k1, b, variant",
        "retrieval.dense.devices": "unknown key; valid keys: model, device, backend",
        "llm.retry.tries": "unknown key; valid keys: max_attempts, base_delay, max_delay, jitter",
    }


def test_problems_across_sections_are_reported_beside_the_others(tmp_path):
    # The http retriever needs a base_url, the answer grid's k must be retrieved: both are found even though the
    # same sections hold other errors.
    assert _problems(
        tmp_path,
        "retrievers: [bm25, http, bm25]\nk_values: [3]\n"
        "retrieval: {bm25: {b: 2}, http: {path: 5}}\nanswering: {answerer: llm, k_values: [3, 5], adapter_id: 1}\n",
    ) == {
        "retrievers": "must be a non-empty list without duplicates",
        "retrieval.http.base_url": "required when the http retriever is listed",
        "retrieval.bm25.b": "must be between 0 and 1, got 2.0",
        "retrieval.http.path": "wrong type int",
        "answering.adapter_id": "wrong type int",
        "answering.k_values": "must be a non-empty list of integers from 1 to max(k_values) = 3",
        "answering.answerer": "'llm' needs an llm section (base_url, model), top-level or answering.llm",
    }
    assert _problems(tmp_path, "retrievers: [http]\nretrieval: {http: {max_attempts: 0}}\n") == {
        "retrieval.http.max_attempts": "must be >= 1, got 0",
        "retrieval.http.base_url": "required when the http retriever is listed",
    }


def test_gate_max_error_rate_and_strict_gold_load_and_settings_do_not_change(tmp_path):
    from pydantic import ValidationError

    s = load_settings(_write(tmp_path, BASE + "evalset: {name: e, path: q, strict_gold: true}\n"
                                              "report: {gate: {max_error_rate: 0.2}}\n"))
    assert s.evalset.strict_gold and s.report.gate.max_error_rate == 0.2
    assert load_settings(_write(tmp_path, BASE)).evalset.strict_gold is False
    with pytest.raises(ValidationError):
        s.retrieval.bm25.k1 = 2.0  # type: ignore[misc]
    tuned = s.model_copy(update={"k_values": (1, 2)})
    assert (tuned.k_values, tuned.config_file, s.k_values) == ((1, 2), s.config_file, (1, 3, 5, 10, 20))
    assert hash(load_settings(REPO / "rag_eval.yaml")) == hash(load_settings(REPO / "rag_eval.yaml"))


def test_each_retriever_kind_validates_its_parameters_alone():
    from pydantic import ValidationError

    from rag_eval_assets.retrieval.kinds.bm25 import Bm25Settings
    from rag_eval_assets.retrieval.kinds.http import HttpSettings
    from rag_eval_assets.settings_base import problems

    assert Bm25Settings.model_validate({"k1": 1.2, "b": 0.75}) == Bm25Settings(k1=1.2, b=0.75, variant="lucene")
    with pytest.raises(ValidationError) as info:
        Bm25Settings.model_validate({"kind": "bm25", "b": 2})
    assert problems(info.value, Bm25Settings) == [("b", "must be between 0 and 1, got 2.0"),
                                                  ("kind", "unknown key; valid keys: k1, b, variant")]
    with pytest.raises(ValidationError) as info:
        HttpSettings(base_url="ftp://sut", path="/ask")
    assert problems(info.value, HttpSettings) == [("base_url", "must start with http:// or https://")]


def test_compare_flags_out_of_range_name_the_flag(tmp_path, capsys, monkeypatch):
    from rag_eval_assets.cli import main

    monkeypatch.chdir(tmp_path)  # no rag_eval.yaml here: the gate's own defaults
    assert main(["compare", "--base", "b", "--cand", "c", "--alpha", "2", "--max-regressions", "-1"]) == 2
    assert capsys.readouterr().err.splitlines() == ["error: --max-regressions: must be >= 0, got -1",
                                                    "error: --alpha: must be between 0 and 1, got 2.0"]


def test_the_gate_names_only_retrievers_of_the_run(tmp_path):
    base = ("corpus: {id: c, path: d}\nevalset: {name: e, path: q}\nretrievers: [bm25, http]\n"
            "retrieval: {http: {base_url: 'http://127.0.0.1:9/'}}\n")
    gate = load_settings(_write(tmp_path, base + "report: {gate: {retrievers: [http]}}\n")).report.gate
    assert gate.retrievers == ("http",)
    with pytest.raises(InputError) as info:
        load_settings(_write(tmp_path, base + "report: {gate: {retrievers: [htp]}}\n"))
    assert {p.field: p.message for p in info.value.problems} == {
        "report.gate.retrievers": "names no retriever of this run: htp (retrievers: bm25, http)"}


def test_execution_dask_takes_an_address_or_the_variable_holding_it(tmp_path, monkeypatch):
    head = "corpus: {id: c, path: d}\nevalset: {name: e, path: q}\n"
    assert load_settings(_write(tmp_path, head)).execution.dask is None
    written = load_settings(_write(tmp_path, head + "execution: {dask: {address: 'tcp://10.0.0.5:8786'}}\n"))
    assert written.execution.dask.scheduler_address() == "tcp://10.0.0.5:8786"
    from_env = load_settings(
        _write(tmp_path, head + "execution: {dask: {address_env: RAG_EVAL_DASK}}\n")).execution.dask
    monkeypatch.delenv("RAG_EVAL_DASK", raising=False)
    with pytest.raises(ValueError, match="execution.dask.address_env names RAG_EVAL_DASK, which is not set"):
        from_env.scheduler_address()
    monkeypatch.setenv("RAG_EVAL_DASK", "10.0.0.5:8786")
    with pytest.raises(ValueError, match="whose value is not a dask scheduler address"):
        from_env.scheduler_address()
    monkeypatch.setenv("RAG_EVAL_DASK", "tls://10.0.0.5:8786")
    assert from_env.scheduler_address() == "tls://10.0.0.5:8786"

    for block, expected in (
        ("{dask: {}}", {"execution.dask.address": "required: the scheduler's address (tcp://host:8786), or "
                                                  "address_env naming the environment variable that holds it"}),
        ("{dask: {address: '10.0.0.5:8786'}}",
         {"execution.dask.address": "must be a dask scheduler address such as tcp://10.0.0.5:8786 (protocols: "
                                    "tcp, tls, ucx, ws, wss, inproc)"}),
        ("{dask: {address: 'tcp://h:1', address_env: X}}",
         {"execution.dask.address_env": "give address or address_env, not both"}),
        ("{dask: {address_env: 'not a name'}}",
         {"execution.dask.address_env": "must be the name of an environment variable (letters, digits, _), "
                                        "e.g. RAG_EVAL_DASK"}),
        ("{dusk: {}}", {"execution.dusk": "unknown key; valid keys: dask"}),
    ):
        with pytest.raises(InputError) as info:
            load_settings(_write(tmp_path, head + f"execution: {block}\n"))
        assert {p.field: p.message for p in info.value.problems} == expected, block
