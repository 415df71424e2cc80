"""The HTML report: self-contained (no external URL), every chart embedded, and rendered by a real headless
Chromium (Debian's `chromium` package; skipped when it is absent, except in CI)."""

from __future__ import annotations

import base64
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rag_eval_assets.reports.html import CHARTS, CHARTS_DIR, build_report
from rag_eval_assets.reports.run_directory import write_run
from rag_eval_assets.runs.store import Run, read_run
from rag_eval_assets.verdict.settings import GateSettings
from rag_eval_assets_tests.test_reports_charts import HEIGHT, WIDTH, png_size
from rag_eval_assets_tests.test_runs_store import write_sample_run
from rag_eval_assets_tests.real_components import CHROMIUM, CHROMIUM_ARGS, unavailable

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
URL_ATTRIBUTES = ("src", "href", "srcset", "action", "poster", "data", "formaction")


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data
        else:
            self.text.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    run = read_run(write_sample_run(tmp_path_factory.mktemp("runs")))
    return run, build_report(run)


@pytest.fixture(scope="module")
def worse_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """The sample run written against a baseline whose bm25 found everything it could. Eight labelled questions
    cannot survive a correction over six cells (p >= 2/2^8 each), so this gate corrects nothing."""
    runs = tmp_path_factory.mktemp("runs")
    sample = read_run(write_sample_run(runs / "sample"))
    perfect = [{**r, "metrics": {m: (1.0 if v is not None else None) for m, v in r["metrics"].items()}}
               if r["retriever"] == "bm25" else r for r in sample.results]
    base = write_run(runs, results=perfect, metrics=sample.metrics, config=sample.config, run_id="perfect")
    run = read_run(write_run(runs, results=sample.results, metrics=sample.metrics, config=sample.config,
                             previous=base, run_id="worse", gate=GateSettings(correction="none")))
    return run, build_report(run)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def test_report_embeds_every_chart_as_a_png_data_uri(report: tuple[Run, Path], tmp_path: Path) -> None:
    run, path = report
    assert path == run.path / "report.html"
    page = parse(path)
    images = {attrs["data-chart"]: attrs for tag, attrs in page.tags if tag == "img"}
    # The sample questions have a type but no category, difficulty or tag: those charts are left out.
    assert set(images) == set(CHARTS) - {"by_category", "by_difficulty", "by_tag"}
    for name, attrs in images.items():
        prefix = "data:image/png;base64,"
        assert attrs["src"].startswith(prefix)
        png = tmp_path / f"{name}.png"
        png.write_bytes(base64.b64decode(attrs["src"][len(prefix):], validate=True))
        assert png.stat().st_size > 5000 and png_size(png) == (WIDTH, HEIGHT)
        assert png.read_bytes() == (run.path / CHARTS_DIR / f"{name}.png").read_bytes()
        assert attrs["alt"] == CHARTS[name]


@pytest.mark.parametrize("which", ["report", "worse_report"])
def test_report_has_no_external_url(which: str, request: pytest.FixtureRequest) -> None:
    _, path = request.getfixturevalue(which)
    page = parse(path)
    urls = [attrs[a] for _, attrs in page.tags for a in URL_ATTRIBUTES if attrs.get(a)]
    assert urls and all(u.startswith("data:image/png;base64,") for u in urls)
    assert not [u for u in urls if "http" in u.lower() or "//" in u.split(",")[0]]
    assert {tag for tag, _ in page.tags}.isdisjoint({"link", "iframe", "object", "embed"})
    # The only script is the verdict section's own (sorting and opening questions), inline.
    scripts = [attrs for tag, attrs in page.tags if tag == "script"]
    assert len(scripts) == (which == "worse_report") and not any(attrs for attrs in scripts)
    assert "url(" not in page.style and "@import" not in page.style


def test_report_shows_configuration_and_summary(report: tuple[Run, Path]) -> None:
    run, path = report
    page = parse(path)
    text = " ".join(" ".join(page.text).split())
    assert "chunk_size_chars 800 overlap_chars 100" in text
    assert f"config_hash {run.config['config_hash']}" in text
    assert "eval_set_version sample@eeeeeeeeeeee" in text
    # The version tuple, part by part.
    for part, key, value in (("index", "chunker_version", "chars-v1"), ("judge", "prompt_version", "groundedness-v1"),
                             ("dataset", "corpus_sha256", "c" * 64)):
        assert f"{part} {key} {value}" in text
    aggregate = run.aggregate_frame()
    row = aggregate[(aggregate["retriever"] == "bm25") & (aggregate["k"] == 5) & (aggregate["slice"] == "all")]
    values = " ".join(f"{v:.3f}" if not np.isnan(v) else "—" for v in row["value"])
    assert f"bm25 5 {values}" in text
    assert "correctness : no judge endpoint configured" in text  # <b>metric</b>: reason
    assert "type=negative" in text and "By question type (k = 3)" in text
    assert "By category" not in text  # the sample questions have no category


def test_the_report_opens_with_the_verdict_then_the_ranking(worse_report: tuple[Run, Path], report) -> None:
    run, path = worse_report
    html = path.read_text(encoding="utf-8")
    assert html.index('id="verdict"') < html.index('id="ranking"') < html.index("Summary (all questions)")
    text = " ".join(" ".join(parse(path).text).split())
    assert f"WORSE against run {run.comparison['base_run_id']} (exit 1)" in text
    deciding = run.comparison["deciding_cells"]
    assert deciding and all(cell.startswith("bm25@") for cell in deciding)
    assert f"Cells that decided it: {', '.join(deciding)}" in text
    # Every gate cell is a row, with its delta and interval.
    cells = run.comparison["cells"]
    assert html.count('<tr class="result-') == len(cells)
    worst = next(c for c in cells if c["result"] == "worse")
    assert f"{worst['delta']:+.4f}" in text and f"[{worst['ci_low']:+.4f}, {worst['ci_high']:+.4f}]" in text
    assert "Top regressions" in text and run.comparison["top_regressions"][0]["question"] in text
    # The gate table leads with the three deciding cells; dense's identical cells fold into one expandable line.
    gate = html[html.index('id="gate-cells"'):html.index("</table>", html.index('id="gate-cells"'))]
    assert gate.count("<tr class=\"result-worse\">") == 3 and "dense@" not in gate
    assert '<details id="identical-cells"><summary>3 cells identical: dense@1-5</summary>' in html
    # One evidence section per deciding cell, its questions (the sample rows keep no gold) each with both lists.
    assert [e["retriever"] + "@" + str(e["k"]) for e in run.comparison["evidence"]] == deciding
    assert html.count('<section class="evidence"') == len(deciding)
    assert html.count('<tbody class="question"') == sum(len(e["questions"]) for e in run.comparison["evidence"])
    assert "bm25@1 ndcg@k (worse): 7 questions down (7 success → failure), 0 up" in text
    # The ranking: 8 labelled questions cannot tell bm25 from dense at k = 1 (one question apart: dense is behind
    # under 1 of the 2 sign patterns of that question, p 0.5), so both may be the best.
    assert "Which retriever is best" in text
    assert ("k=1: bm25 best, ndcg@k 0.125 vs dense 0.000; 2 variants may be the best at alpha 0.05 (all): bm25, "
            "dense") in text
    ranking = html[html.index('id="ranking-k1"'):html.index("</table>", html.index('id="ranking-k1"'))]
    assert '<tr data-retriever="bm25" class="best"><td class="num">1</td><td>bm25</td><td>best</td>' in ranking
    assert '<tr data-retriever="dense" class="may-be-best">' in ranking and "<td>may be best</td>" in ranking
    # The summary is two tables, retrieval and answers; the trend chart is there.
    assert 'id="summary-retrieval"' in html and 'id="summary-answers"' in html and 'data-chart="trend"' in html
    first_text = " ".join(" ".join(parse(report[1]).text).split())
    assert "No baseline run yet" in first_text


def screenshot(page: Path, name: str, size: tuple[int, int], profile: Path) -> np.ndarray:
    """`page` as rendered by a real headless Chromium, saved to test-artifacts/`name`; its RGB pixels."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: apt-get install -y chromium")
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / name
    shot.unlink(missing_ok=True)
    command = [str(CHROMIUM), "--headless", *CHROMIUM_ARGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
               f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    assert shot.stat().st_size > 10_000 and png_size(shot) == size
    return np.asarray(Image.open(shot).convert("RGB")).astype(int)


def test_headless_chromium_renders_the_report(report: tuple[Run, Path], tmp_path: Path) -> None:
    pixels = screenshot(report[1], "report_screenshot.png", (1280, 4000), tmp_path / "profile")
    not_white = np.any(pixels < 235, axis=2)
    # Chart colours (matplotlib's blue and orange bars), which only the embedded PNGs can have put there.
    coloured = (pixels.max(axis=2) - pixels.min(axis=2)) > 80
    # The verdict and ranking text come first; the charts still fill much of the 4000 pixels.
    assert not_white.mean() > 0.03, not_white.mean()
    assert coloured.mean() > 0.005, coloured.mean()


def test_the_verdict_is_visible_in_chromium(worse_report: tuple[Run, Path], tmp_path: Path) -> None:
    """The red verdict banner is on screen in the first 700 pixels of a real browser's rendering."""
    pixels = screenshot(worse_report[1], "report_verdict_screenshot.png", (1280, 900), tmp_path / "profile")[:700]
    banner = np.all(np.abs(pixels - np.array([0xFB, 0xE3, 0xE3])) <= 2, axis=2)  # .verdict-worse background
    assert banner.sum() > 20_000, banner.sum()
