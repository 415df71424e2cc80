from __future__ import annotations

import pytest

from rag_eval_assets.corpus.headings import heading_components, heading_prefix_match, normalise_heading_path


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("", ""),
        ("#", ""),
        ("# Golang Tips & Oddities", "Golang Tips & Oddities"),
        ("## A>B", "A > B"),
        ("  # A  >   ## B   >### C ", "A > B > C"),
        ("A > > B", "A > B"),
        ("Title   with\tspaces", "Title with spaces"),
        ("## Closed heading ##", "Closed heading"),
        ("C# > F#", "C# > F#"),
        ("Налоговые вычеты > ## Имущественный вычет", "Налоговые вычеты > Имущественный вычет"),
    ],
)
def test_normalise_heading_path(raw: str, normal: str) -> None:
    assert normalise_heading_path(raw) == normal
    assert normalise_heading_path(normal) == normal


def test_heading_components() -> None:
    assert heading_components("# A >## B") == ("A", "B")
    assert heading_components("") == ()


@pytest.mark.parametrize(
    ("chunk", "gold", "expected"),
    [
        ("A > B > C", "A > B", True),
        ("A > B", "# A > ## B", True),
        ("A > B", "A>B", True),
        ("A > B", "A > B > C", False),
        ("Golang", "Go", False),
        ("Golang Tips", "Golang", False),
        ("A > Bc", "A > B", False),
        ("anything > at all", "", True),
        ("", "", True),
        ("", "A", False),
        ("a > b", "A", False),
    ],
)
def test_heading_prefix_match_is_component_wise(chunk: str, gold: str, expected: bool) -> None:
    assert heading_prefix_match(chunk, gold) is expected
