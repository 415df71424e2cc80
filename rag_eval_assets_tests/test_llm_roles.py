"""Each role names its model (issue 29, point 2): the answerer and query generation on the top-level `llm`, the
judges on `judge.llm` and ragas' LLM metrics on `ragas.llm`, two OpenAI-compatible servers on loopback, `rag-eval run`
over the sample data. Every call goes where its role says, with its role's model, key and headers; changing the
answerer's model is a configuration difference the gate gives a verdict on, not an incompatibility."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from rag_eval_assets.cli import main
from rag_eval_assets_tests.judge_scenario import Judge, responder
from rag_eval_assets_tests.judged_runs import sample_evalset
from rag_eval_assets_tests.llm_fault_server import llm_fault_server
from rag_eval_assets_tests.sample_config import write_sample_config

ANSWER_KEY, JUDGE_KEY, TEAM = "sk-answer-0123456789", "sk-judge-9876543210", "team-secret-42"


def role(body: dict) -> str:
    title = ((body.get("response_format") or {}).get("schema") or {}).get("title")
    return {"answer": "answerer", "generated_query": "query_generation", "groundedness": "judge",
            "correctness": "judge"}.get(title, "ragas")


def config(directory: Path, evalset: Path, a: str, b: str, answer_model: str, ragas: bool = True) -> Path:
    return write_sample_config(
        directory,
        "retrievers: [bm25]\nk_values: [3]\nanswering: {answerer: llm, k_values: [3]}\n"
        f"llm: {{base_url: '{a}', model: {answer_model}, api_key_env: ANSWER_KEY}}\n"
        f"judge: {{llm: {{base_url: '{b}', model: judge-big, api_key_env: JUDGE_KEY, headers_env: JUDGE_HEADERS}}}}\n"
        + (f"ragas: {{llm_metrics: true, llm: {{base_url: '{b}', model: ragas-m}}}}\n" if ragas else ""),
        evalset=evalset)


def calls(server) -> Counter:
    return Counter((role(r.body), r.body["model"], r.headers.get("Authorization"), r.headers.get("X-Team"))
                   for r in server.requests)


def test_every_call_goes_where_its_role_says(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # an instance of its own
    monkeypatch.setenv("ANSWER_KEY", ANSWER_KEY)
    monkeypatch.setenv("JUDGE_KEY", JUDGE_KEY)
    monkeypatch.setenv("JUDGE_HEADERS", json.dumps({"X-Team": TEAM}))
    evalset = sample_evalset(tmp_path)
    with llm_fault_server(responder=responder(Judge())) as a, llm_fault_server(responder=responder(Judge())) as b:
        assert main(["run", "--config", str(config(tmp_path, evalset, a.base_url, b.base_url, "answer-s"))]) == 0
        on_a, on_b = calls(a), calls(b)
        # The answerer and query generation on the top-level endpoint with its key, nothing else there.
        assert {(r, m, auth, team) for r, m, auth, team in on_a} == {
            ("answerer", "answer-s", f"Bearer {ANSWER_KEY}", None),
            ("query_generation", "answer-s", f"Bearer {ANSWER_KEY}", None)}
        # The judges with their model, key and headers; ragas with its own model and no key.
        assert {(r, m, auth, team) for r, m, auth, team in on_b} == {
            ("judge", "judge-big", f"Bearer {JUDGE_KEY}", TEAM), ("ragas", "ragas-m", None, None)}
        per_role = Counter(r for (r, *_), n in (on_a + on_b).items() for _ in range(n))
        # 14 questions answered, each judged twice (groundedness, correctness); 10 chunks x 3 question types
        # generated; ragas' two LLM context metrics over the 13 questions with gold.
        assert per_role == {"answerer": 14, "judge": 28, "query_generation": 30, "ragas": 52}
        (run_dir,) = (tmp_path / "store" / "runs").iterdir()
        metadata = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
        assert metadata["version_tuple"]["judge"]["model"] == "judge-big"
        assert metadata["version_tuple"]["answerer"]["model"] == "answer-s"
        for path in run_dir.rglob("*"):
            if path.is_file() and path.suffix in (".json", ".md", ".html", ".log", ".jsonl"):
                text = path.read_text(encoding="utf-8", errors="replace")
                assert ANSWER_KEY not in text and JUDGE_KEY not in text and TEAM not in text, path

        # Another answer model, the same judge: a configuration difference with a verdict, not exit 2.
        a.requests.clear(), b.requests.clear()
        capsys.readouterr()
        code = main(["run", "--config", str(config(tmp_path, evalset, a.base_url, b.base_url, "answer-l"))])
        # The answers (and the generated queries) are asked of the new model; their texts are the same (the
        # scripted server's), so the judge's inputs are too and its replies come from the cache: no judge call.
        assert {(r, m) for r, m, *_ in calls(a)} == {("answerer", "answer-l"), ("query_generation", "answer-l")}
        assert calls(b) == Counter()
        # ragas' LLM metrics are off unless asked for: without the ragas section nothing is sent for them.
        a.requests.clear(), b.requests.clear()
        assert main(["run", "--config", str(config(tmp_path, evalset, a.base_url, b.base_url, "answer-l",
                                                   ragas=False))]) in (0, 1)
        assert calls(a) + calls(b) == Counter()
    base, cand, _ = sorted((tmp_path / "store" / "runs").iterdir())
    comparison = json.loads((cand / "comparison.json").read_text(encoding="utf-8"))
    assert code in (0, 1) and comparison["verdict"] != "incompatible" and comparison["incompatible"] == []
    versions = [json.loads((run / "config.json").read_text(encoding="utf-8"))["version_tuple"] for run in (base, cand)]
    assert [v["answerer"]["model"] for v in versions] == ["answer-s", "answer-l"]
    assert versions[0]["judge"] == versions[1]["judge"]
