"""Heading paths: the one normal form (seed 002 "Match Definition") and prefix matching on it."""

from __future__ import annotations

import re

DELIMITER = " > "

_LEADING_MARKERS = re.compile(r"^#+\s*")
# A closing ATX sequence ("## Title ##") is a marker too, but only when set off by a space:
# "C#" is a heading about a language, not a marker.
_CLOSING_MARKERS = re.compile(r"\s+#+$")


def heading_components(s: str) -> tuple[str, ...]:
    """Split a heading path at ">" (any spacing) into cleaned components.

    Each component loses its "#" level markers and has runs of whitespace collapsed to one space;
    empty components are dropped, so "" and "#" both give ().
    """
    components = []
    for part in s.split(">"):
        part = " ".join(part.split())
        part = _CLOSING_MARKERS.sub("", _LEADING_MARKERS.sub("", part)).strip()
        if part:
            components.append(part)
    return tuple(components)


def normalise_heading_path(s: str) -> str:
    """The normal form: components from `heading_components` joined by " > " ("" stays "")."""
    return DELIMITER.join(heading_components(s))


def heading_prefix_match(chunk_heading_path: str, gold_heading_path: str) -> bool:
    """True when the gold path's components are the leading components of the chunk's path.

    The prefix is taken component-wise, not character-wise, after normalising both sides: gold
    "A > B" matches chunk "A > B > C" (deeper chunking keeps matching, which is why seed 002 uses a
    prefix), but gold "Go" does not match chunk "Golang", which a string prefix would wrongly
    accept. Gold "" has no components and so matches every chunk. Comparison is case-sensitive:
    the seed normalises spacing, delimiters and markers only.
    """
    gold = heading_components(gold_heading_path)
    return heading_components(chunk_heading_path)[: len(gold)] == gold
