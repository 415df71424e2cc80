"""No credential is stored, logged or shown (issue 15, point 3).

Canaries go where credentials go: the API key (the variable `api_key_env` names, for the LLM and the service under
test), a password in URL userinfo and a `?token=` in a base_url. `rag-eval run` then runs three times into one store
and one Dagster home: against servers that answer, against servers that fail every call (500 then 401, truncated
JSON), and against a service that is down (the pipeline stops at its retrieval). No canary may appear in any byte
the runs wrote (Parquet decoded, JSON, Markdown, HTML, SQLite caches, Dagster's SQLite storage and compute logs,
rag-eval's log files), in the terminal, or in what the Dagster webserver answers over GraphQL about those runs.
With storage_dir on s3:// (a real S3-compatible server, s3_server.py) the secret access key, read from
AWS_SECRET_ACCESS_KEY, reaches none of that nor any object in the bucket, in a run that succeeds or one that fails.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import dagster as dg
import pandas as pd

from rag_eval_assets.cli import main
from rag_eval_assets.corpus.chunking import ChunkerParams, chunk_documents
from rag_eval_assets.corpus.load import load_corpus
from rag_eval_assets.defs.run_log import LOG_FILE
from rag_eval_assets_tests.dagster_server import BIN, dagster_env, graphql, running_server, wait_for_asset_keys
from rag_eval_assets_tests.llm_fault_server import Reply, Status, llm_fault_server, schema_reply
from rag_eval_assets_tests.s3_server import s3_server
from rag_eval_assets_tests.sample_config import SAMPLE, write_sample_config
from rag_eval_assets_tests.stored_tables import newest_pipeline, stored_table
from rag_eval_assets_tests.sut_server import CorpusChunk, sut_server, unused_port

KEY = "CANARY-KEY-4f1e"
PASSWORD = "CANARY-PASS-9b2c"
TOKEN = "CANARY-TOKEN-7d3a"
AWS_SECRET = "CANARY-AWS-SECRET-5e8f"
CANARIES = (KEY, PASSWORD, TOKEN, AWS_SECRET)
KEY_ENV = "RAG_EVAL_CANARY_KEY"
N_QUESTIONS = 2
# Valid replies per schema title (prompts.py), so that the answering run succeeds; ragas gets echoes.
REPLIES = {
    "answer": {"answer": "Below 15 m/s [1].", "citations": [1], "abstained": False, "abstain_reason": ""},
    "groundedness": {"supported_claims": ["wind"], "unsupported_claims": [], "score": 4},
    "correctness": {"reasoning": "matches the reference", "score": 4},
    "generated_query": {"question": "What are the wind limits?", "answer": "15 m/s"},
}
# Dagster's handler on httpx: its INFO line per request ("HTTP Request: POST <url>") goes to the event log too.
INSTANCE_YAML = "python_logs:\n  python_log_level: INFO\n  managed_python_loggers: [httpx, rag_eval_assets]\n"


def _reply(body: dict) -> Reply:
    schema = (body.get("response_format") or {}).get("schema") or {}
    known = REPLIES.get(schema.get("title"))
    return Reply(json.dumps(known)) if known else schema_reply(body)


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://svc:{PASSWORD}@", 1)


def _config(tmp: Path, evalset: Path, llm_url: str, sut_url: str, model: str = "canary-model") -> Path:
    return write_sample_config(
        tmp,
        "retrievers: [bm25, http]\nk_values: [2]\n"
        "answering: {answerer: llm, k_values: [1, 2]}\n"
        "query_generation: {n_chunks: 1, seed: 0}\n"
        f"llm: {{base_url: '{llm_url}', model: {model}, api_key_env: {KEY_ENV}, max_tokens: 64}}\n"
        f"retrieval: {{http: {{base_url: '{sut_url}', api_key_env: {KEY_ENV}, read_timeout: 5, max_attempts: 2}}}}\n",
        evalset=evalset,
        name="canary",
    )


def _run(config: Path) -> int:
    return main(["--config", str(config), "run"])


def _written_text(root: Path, config: Path) -> dict[str, str]:
    """Every file under `root` but the configuration (the one place credentials are written by the user) as text:
    Parquet decoded (its pages are compressed), anything else byte for byte."""
    return {str(path): _decoded(path.name, path.read_bytes()) for path in root.rglob("*")
            if path.is_file() and path != config}


def _decoded(name: str, raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    if name.endswith(".parquet"):
        text += pd.read_parquet(io.BytesIO(raw)).to_json(orient="records", force_ascii=False)
    return text


def _leaks(texts: dict[str, str]) -> dict[str, list[str]]:
    return {name: [c for c in CANARIES if c in text] for name, text in texts.items() if any(c in text for c in CANARIES)}


METADATA = """
  metadataEntries { label
    ... on TextMetadataEntry { text } ... on MarkdownMetadataEntry { mdStr } ... on JsonMetadataEntry { jsonString }
    ... on PathMetadataEntry { path } ... on UrlMetadataEntry { url } }
"""
ERROR = "error { message className stack cause { message stack } }"
RUNS = "{ runsOrError { ... on Runs { results { runId status runConfigYaml tags { key value } } } } }"
EVENTS = f"""query($runId: ID!) {{ logsForRun(runId: $runId) {{ ... on EventConnection {{ events {{
  __typename ... on MessageEvent {{ message stepKey }}
  ... on MaterializationEvent {{ {METADATA} }}
  ... on ObservationEvent {{ {METADATA} }}
  ... on ExecutionStepFailureEvent {{ {ERROR} }}
  ... on RunFailureEvent {{ {ERROR} }}
  ... on EngineEvent {{ {ERROR} {METADATA} }}
  ... on LogsCapturedEvent {{ fileKey }}
  ... on AssetCheckEvaluationEvent {{ evaluation {{ description {METADATA} }} }}
}} }} }} }}"""
LOGS = "query($key: [String!]!) { capturedLogs(logKey: $key) { stdout stderr } }"
ASSETS = f"{{ assetNodes {{ assetKey {{ path }} description assetMaterializations(limit: 5) {{ {METADATA} }} }} }}"


def _graphql_answers(url: str) -> list[str]:
    """What the webserver tells a browser about the runs: runs, their events (metadata, errors), compute logs."""
    wait_for_asset_keys(url)
    answers = [json.dumps(graphql(url, RUNS)), json.dumps(graphql(url, ASSETS))]
    for run in graphql(url, RUNS)["runsOrError"]["results"]:
        events = graphql(url, EVENTS, {"runId": run["runId"]})
        answers.append(json.dumps(events))
        for event in events["logsForRun"]["events"]:
            if event["__typename"] == "LogsCapturedEvent":
                key = [run["runId"], "compute_logs", event["fileKey"]]
                answers.append(json.dumps(graphql(url, LOGS, {"key": key})))
    return answers


def test_no_canary_reaches_any_artifact_log_terminal_or_the_ui(tmp_path, monkeypatch, capfd):
    lines = (SAMPLE / "evalsets" / "eval_set.jsonl").read_text(encoding="utf-8").splitlines()[:N_QUESTIONS]
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML, encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv(KEY_ENV, KEY)
    chunks = chunk_documents(load_corpus(SAMPLE / "corpus"), "service", ChunkerParams(400, 50))
    corpus = [CorpusChunk(r.rel_path, r.heading_path, r.text) for r in chunks.itertuples()]
    terminal = []

    with llm_fault_server(responder=_reply) as llm, sut_server(corpus) as sut:
        assert _run(_config(tmp_path, evalset, _with_password(llm.base_url), sut.url)) == 0
        terminal.append(capfd.readouterr())
    basic = base64.b64encode(f"svc:{PASSWORD}".encode()).decode()
    assert any(r.headers.get("Authorization") == f"Basic {basic}" for r in llm.requests)  # the password was used
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in sut.requests)  # and the key

    failing = [Status(500), Status(401), "truncated"] * 60
    # The service fails every call (one per question), with 500, then 401.
    sut_faults = [500, 401] * 2 * N_QUESTIONS
    with llm_fault_server(failing, responder=_reply) as llm, sut_server(corpus, faults=sut_faults) as sut:
        # Another model name: the replies of the first run are cached under the first one.
        _run(_config(tmp_path, evalset, _with_password(llm.base_url), sut.url, model="canary-model-2"))
        terminal.append(capfd.readouterr())
    # The failed run committed nothing: its answers are staged under its pipeline.
    assets = tmp_path / "store" / "assets"
    answers = stored_table(assets, "answers/retriever=http/k=1", newest_pipeline(assets))
    assert answers["error"].str.contains("status 401").all()  # the failures were written, with their URLs
    assert answers["error"].str.contains(f"POST {sut.url}/api/v1/ask").all()

    with llm_fault_server(responder=_reply) as llm:
        down = _with_password(f"http://127.0.0.1:{unused_port()}/?token={TOKEN}")
        config = _config(tmp_path, evalset, _with_password(llm.base_url), down)
        assert _run(config) == 1
        terminal.append(capfd.readouterr())
    stderr = terminal[-1].err
    assert "sut_responses" in stderr and "http://svc:***@127.0.0.1" in stderr  # the failed calls, URL redacted

    written = _written_text(tmp_path, config)
    assert any(name.endswith("config.json") for name in written)
    assert any("compute_logs" in name for name in written)  # Dagster captured the steps' output
    # rag-eval's own log: every Dagster event and log line of each run, in its run directory; the failed calls' URL
    # is in it, redacted.
    logs = {name: text for name, text in written.items() if name.endswith(".log") and "/store/runs/" in name}
    assert sum(name.endswith(f"/{LOG_FILE}") for name in logs) >= 1
    assert any("sut_responses" in text and "http://svc:***@127.0.0.1" in text for text in logs.values())
    assert _leaks(written) == {}
    for captured in terminal:
        assert not any(c in captured.out + captured.err for c in CANARIES)

    env = dagster_env(home, config)
    with running_server([str(BIN / "dagster-webserver"), "-w", "workspace.yaml"], env,
                        tmp_path / "webserver.log") as url:
        answers_text = "\n".join(_graphql_answers(url))
    assert "svc:***@127.0.0.1" in answers_text  # the UI shows the URLs, redacted
    assert not any(c in answers_text for c in CANARIES)
    assert _leaks(_written_text(tmp_path, config)) == {}  # nor did the webserver write one (its log, its storage)


def test_no_aws_secret_reaches_a_run_on_s3_its_bucket_or_its_events(tmp_path, monkeypatch, capfd):
    lines = (SAMPLE / "evalsets" / "eval_set.jsonl").read_text(encoding="utf-8").splitlines()[:N_QUESTIONS]
    evalset = tmp_path / "eval_set.jsonl"
    evalset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    terminal, down = [], f"http://127.0.0.1:{unused_port()}"
    with s3_server(secret=AWS_SECRET) as s3:
        for name, value in s3.env().items():
            monkeypatch.setenv(name, value)
        storage = s3.create_bucket("canary") + "/store"
        configs = []
        for name, retrievers in (("good", "[bm25]"), ("failing", "[bm25, http]")):
            directory = tmp_path / name
            directory.mkdir()
            config = write_sample_config(directory, (
                f"retrievers: {retrievers}\nk_values: [2]\nanswering: {{k_values: [1]}}\n"
                # A service that is down: the run fails at its retrieval, after its inputs were staged in the bucket.
                f"retrieval: {{http: {{base_url: '{down}', read_timeout: 5, "
                "max_attempts: 1}}\n"), evalset=evalset, name="canary")
            config.write_text(config.read_text(encoding="utf-8").replace(
                f"storage_dir: {directory / 'store'}", f"storage_dir: {storage}"), encoding="utf-8")
            assert AWS_SECRET not in config.read_text(encoding="utf-8")
            configs.append(config)
        assert _run(configs[0]) == 0
        terminal.append(capfd.readouterr())
        assert _run(configs[1]) == 1
        terminal.append(capfd.readouterr())
        objects = s3.objects("canary")
    assert any(key.endswith("/current.json") for key in objects) and any("_staging/" in key for key in objects)
    assert "sut_responses" in terminal[-1].err and down in terminal[-1].err  # it failed calling the service

    written = {**_written_text(tmp_path, configs[1]), **{f"s3://canary/{key}": _decoded(key, raw)
                                                         for key, raw in objects.items()}}
    assert sum(key.endswith(".parquet") for key in written) >= 15 and any(k.endswith("config.json") for k in written)
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs()
        events = [dg.serialize_value(instance.all_logs(run.run_id)) for run in runs]
    assert len(runs) >= 5 and any("ASSET_MATERIALIZATION" in text for text in events)
    assert _leaks(written) == {}
    assert not any(AWS_SECRET in text for text in events)
    for captured in terminal:
        assert AWS_SECRET not in captured.out + captured.err
