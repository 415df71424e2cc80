"""The one redaction of URLs: userinfo and secret-looking parameters masked, everything else kept as written."""

import json
import logging

import pandas as pd
import pytest

from rag_eval_assets.redaction import install_log_redaction, redact, redact_text, redact_url
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.store import read_run


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pa55@host:8080/v1", "http://user:***@host:8080/v1"),
        ("https://ghp_abc123@github.com/o/r.git", "https://***@github.com/o/r.git"),
        ("http://h/v1?token=t&k=5&debug=true", "http://h/v1?token=***&k=5&debug=true"),
        ("http://h/?API_KEY=a&apikey=b&x-api-key=c&sig=d&Signature=e&client_secret=f&password=g&q=key",
         "http://h/?API_KEY=***&apikey=***&x-api-key=***&sig=***&Signature=***&client_secret=***&password=***&q=key"),
        ("http://h/cb#access_token=t&state=s", "http://h/cb#access_token=***&state=s"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://[::1/x?token=t", "http://[::1/x?token=***"),  # unparseable, still masked
    ],
)
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_redact_text_finds_urls_in_messages_and_reprs():
    text = ("POST http://u:s3cret@127.0.0.1:5/v1/chat/completions failed (attempt 1: status 500); "
            "URL('https://h/api?token=abc'), \"http://h/?key=k\"")
    assert redact_text(text) == ("POST http://u:***@127.0.0.1:5/v1/chat/completions failed (attempt 1: status 500); "
                                 "URL('https://h/api?token=***'), \"http://h/?key=***\"")
    assert redact_text("no url, token=abc") == "no url, token=abc"


def test_redact_walks_documents():
    document = {"llm": {"base_url": "http://u:p@h/v1", "max_tokens": 5}, "urls": ["http://h/?sig=1", None]}
    assert redact(document) == {"llm": {"base_url": "http://u:***@h/v1", "max_tokens": 5},
                                "urls": ["http://h/?sig=***", None]}


def test_log_records_are_redacted_whichever_logger_makes_them(caplog):
    install_log_redaction()
    install_log_redaction()  # idempotent: one wrapper, not two
    with caplog.at_level(logging.INFO):
        logging.getLogger("httpx").info('HTTP Request: %s %s "%s"', "POST", "http://u:pw@h/v1?token=t", "HTTP/1.1 200")
        try:
            raise RuntimeError("GET http://u:pw@h/x failed")
        except RuntimeError:
            logging.getLogger("rag_eval_assets.some.module").exception("call to %s", "http://h/?api_key=k")
    text = caplog.text
    assert "pw" not in text and "token=t" not in text and "api_key=k" not in text
    assert 'HTTP Request: POST http://u:***@h/v1?token=*** "HTTP/1.1 200"' in text
    assert "RuntimeError: GET http://u:***@h/x failed" in text


def test_run_config_holds_no_credential(tmp_path):
    aggregate = pd.DataFrame([{"retriever": "http", "k": 1, "slice": "all", "metric": "hit@k", "value": 1.0,
                               "ci_low": 1.0, "ci_high": 1.0, "n": 1}])
    config = {"settings": {"retrieval": {"http": {"base_url": "http://svc:pw@h:1/?token=tk", "api_key_env": "K"}},
                           "llm": {"base_url": "http://u:pw2@h/v1", "api_key": "sk-1"}}}
    path = write_run(tmp_path, results=[], metrics={"aggregate": aggregate.to_dict("records")}, config=config)
    written = "".join(p.read_text(encoding="utf-8") for p in path.iterdir())
    assert not any(secret in written for secret in ("pw", "tk", "sk-1"))
    settings = read_run(path).config["settings"]
    assert settings["retrieval"]["http"] == {"base_url": "http://svc:***@h:1/?token=***", "api_key_env": "K"}
    assert json.dumps(settings["llm"]) == '{"base_url": "http://u:***@h/v1"}'
