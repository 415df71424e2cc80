"""The evalset format registry: every format (seed000 ... seed004, beir) declares here what it looks like, and
detection, loading, freezing and the settings' list of formats read those declarations.

A format is a file of records (JSON Lines or one JSON array), each parsed by the format's `parse`, or a directory
read whole by its `load`. Nothing outside this module and the formats' own modules dispatches on a format's name:
adding a format is its module, one line in `formats/__init__.py` and its documentation (docs/architecture.md,
"Evalset formats").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rag_eval_assets.errors import InputProblem
from rag_eval_assets.evalset.records import Record
from rag_eval_assets.evalset.schema import Question

FormatLayout = Literal["jsonl", "array", "directory"]
# Parses one record, recording every problem of it; returns a Question whenever the id is readable, even with other
# fields bad, so duplicate ids are still found (the loader raises before such a Question escapes).
RecordParser = Callable[[str, Record, list[InputProblem]], Question | None]
# Reads the directory at the path (named by the string in problems): its questions and warnings; InputError if bad.
DirectoryLoader = Callable[[Path, str], tuple[list[Question], list[str]]]
LAYOUT_NAMES = {"jsonl": "JSON Lines", "array": "a JSON array"}


@dataclass(frozen=True)
class EvalsetFormat:
    """One evalset format.

    Detection: a directory is the directory format whose `files` it holds. A file is the only format of its layout
    (a JSON array: seed003); where several share the layout (JSON Lines), the one whose `marker_keys` (keys no other
    format of the layout uses) or `marker_types` (values of the record key `type`) the records show. `shared_keys`
    are keys this format reads that mark another format: they count for that format only when this one shows no
    marker of its own (seed004 may carry seed002's gold_supports). With no marker at all, a file whose records hold
    every `fallback_keys` key is the format that declares them (a plain list of questions is seed002).
    """

    name: str
    layout: FormatLayout
    parse: RecordParser | None = None  # a file format's record parser
    load: DirectoryLoader | None = None  # a directory format's loader
    marker_keys: frozenset[str] = frozenset()
    marker_types: frozenset[str] = frozenset()
    shared_keys: frozenset[str] = frozenset()
    fallback_keys: frozenset[str] = frozenset()
    # A directory format: the files detection needs, the files (relative, in order) whose bytes are its version,
    # the name messages use and what it holds ("a directory holding ...").
    files: tuple[str, ...] = ()
    contents: Callable[[Path], list[str]] | None = None
    title: str = ""
    holds: str = ""

    def question(self, file: str, record: Record, qid: str | None, text: str | None, **fields) -> Question | None:
        """The record's Question in this format (None when it has no usable id: its problem is already noted)."""
        if qid is None:
            return None
        return Question(id=qid, question=text or "", format=self.name, source_file=file, source_line=record.line,
                        raw=record.value, **fields)

    def __post_init__(self) -> None:
        directory = self.layout == "directory"
        if directory != (self.load is not None and self.contents is not None) or directory == (self.parse is not None):
            raise ValueError(f"format {self.name}: a directory format has load and contents, a file format parse")

    @property
    def reads(self) -> str:
        """What the format reads, as error messages say it."""
        return f"a directory holding {self.holds}" if self.layout == "directory" else LAYOUT_NAMES[self.layout]


# Every registered format by name, in the order registered (the order error messages list them in).
FORMATS: dict[str, EvalsetFormat] = {}


def register(fmt: EvalsetFormat) -> EvalsetFormat:
    FORMATS[fmt.name] = fmt
    return fmt


def of_layout(layout: FormatLayout) -> list[EvalsetFormat]:
    return [fmt for fmt in FORMATS.values() if fmt.layout == layout]
