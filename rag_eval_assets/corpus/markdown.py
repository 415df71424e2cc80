"""Markdown notes: one Section per ATX heading, with the path of enclosing headings."""

from __future__ import annotations

import re
from pathlib import Path

from rag_eval_assets.corpus.headings import DELIMITER, normalise_heading_path
from rag_eval_assets.corpus.model import Document, Section
from rag_eval_assets.corpus.text import read_utf8

# CommonMark ATX heading: up to 3 spaces indent, 1-6 "#", then a space or the end of the line.
# "#tag" (an Obsidian tag) is therefore not a heading.
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FRONT_MATTER_DELIMITER = "---"


def load_markdown(path: Path, rel_path: str) -> Document:
    """Split a note at its headings.

    Each Section runs from its heading line (included) to the next heading; its heading_path is
    the normalised stack of enclosing headings ("## B" under "# A" gives "A > B"; a later "# C"
    resets it to "C"). Text before the first heading is a Section with heading_path "" when it
    holds anything but whitespace. "#" lines inside fenced code blocks and YAML front matter are
    not headings. The title is the first H1, else the file stem.
    """
    text = read_utf8(path)
    headings = _headings(text)  # (offset, level, heading text)

    sections = []
    first = headings[0][0] if headings else len(text)
    if text[:first].strip():
        sections.append(Section(heading_path="", page=None, text=text[:first], char_start=0))

    stack: list[tuple[int, str]] = []
    for i, (start, level, title) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = headings[i + 1][0] if i + 1 < len(headings) else len(text)
        heading_path = normalise_heading_path(DELIMITER.join(t for _, t in stack))
        sections.append(Section(heading_path=heading_path, page=None, text=text[start:end], char_start=start))

    h1 = next((t for _, level, t in headings if level == 1 and t), None)
    return Document(
        doc_id=rel_path,
        rel_path=rel_path,
        title=h1 or path.stem,
        kind="markdown",
        sections=tuple(sections),
    )


def _headings(text: str) -> list[tuple[int, int, str]]:
    lines = text.split("\n")
    first_body_line = _front_matter_lines(lines)
    found = []
    fence: str | None = None  # the opening fence while inside a code block
    offset = sum(len(line) + 1 for line in lines[:first_body_line])
    for line in lines[first_body_line:]:
        if fence is not None:
            if _closes(fence, line):
                fence = None
        elif opening := _FENCE.match(line):
            fence = opening.group(1)
        elif heading := _ATX.match(line):
            found.append((offset, len(heading.group(1)), normalise_heading_path(heading.group(2) or "")))
        offset += len(line) + 1
    return found


def _front_matter_lines(lines: list[str]) -> int:
    """Number of lines of a YAML front matter block ("# comment" lines there are YAML, not headings)."""
    if not lines or lines[0].rstrip() != _FRONT_MATTER_DELIMITER:
        return 0
    for n in range(1, len(lines)):
        if lines[n].rstrip() == _FRONT_MATTER_DELIMITER:
            return n + 1
    return 0  # never closed: the "---" was a thematic break


def _closes(fence: str, line: str) -> bool:
    """A closing fence uses the opening's character, at least as many times, and nothing after it."""
    closing = _FENCE.match(line)
    if closing is None:
        return False
    marks, rest = closing.groups()
    return marks[0] == fence[0] and len(marks) >= len(fence) and not rest.strip()
