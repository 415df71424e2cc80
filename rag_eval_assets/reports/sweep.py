"""A sweep as people read one: the parameters that vary among the variants of one retriever kind, read from each
variant's version in the run's config.json (its version tuple), so that any parameter a version records (k1, b, a
fusion weight, a variant's chunking) is found without being named here; and the gate metric of each variant against
them, the figures of the sweep charts (charts.py plot_sweep) and of their tables in summary.md."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval_assets.reports.markdown import markdown_table
from rag_eval_assets.verdict.ranking import KRanking

# What names a variant rather than configuring it.
NOT_PARAMETERS = ("name", "kind")


@dataclass(frozen=True)
class Sweep:
    kind: str
    parameters: tuple[str, ...]  # dotted version keys whose values differ among the kind's variants
    # one row per ranked variant of the kind: retriever, each parameter's value, value (the gate metric),
    # may_be_best
    frame: pd.DataFrame


def variant_versions(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each retriever's version as config.json's version tuple records it (name -> version); a variant without a
    chunking of its own is given the top-level one, so that a sweep over chunkings that includes the default size
    charts it beside the others."""
    versions = config.get("version_tuple") or {}
    index = versions.get("index") or {}
    default = {key: index[key] for key in ("chunk_size_chars", "overlap_chars") if key in index}
    retrievers = (versions.get("retriever") or {}).get("retrievers") or {}
    return {name: {**version, "chunking": version.get("chunking", default)} if default else dict(version)
            for name, version in retrievers.items()}


def sweeps(config: Mapping[str, Any], ranking: KRanking) -> list[Sweep]:
    """Per retriever kind with two or more ranked variants whose versions differ: the parameters that differ and
    the variants' gate metric at the ranking's k, kinds in name order."""
    versions = variant_versions(config)
    by_kind: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for r in ranking.retrievers:
        version = versions.get(r.retriever)
        if version is not None:
            by_kind.setdefault(str(version.get("kind")), []).append((r.retriever, _flat(version)))
    values = {r.retriever: r for r in ranking.retrievers}
    out = []
    for kind, variants in sorted(by_kind.items()):
        # Sorted, so that summary.md (written from the settings) and report.html (from config.json) agree.
        keys = sorted({key for _, flat in variants for key in flat if key not in NOT_PARAMETERS})
        swept = _independent([key for key in keys if len({json.dumps(flat.get(key)) for _, flat in variants}) > 1],
                             [flat for _, flat in variants])
        if len(variants) < 2 or not swept:
            continue
        frame = pd.DataFrame([{"retriever": name, **{key: flat.get(key) for key in swept},
                               "value": values[name].value, "may_be_best": values[name].may_be_best}
                              for name, flat in variants])
        out.append(Sweep(kind, swept, frame))
    return out


def _independent(keys: Sequence[str], flats: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """`keys` less each one that moves in step with one kept before it (each value of one goes with one value of the
    other, both ways: a chunking's overlap swept with its size), which would only chart the same points again."""
    kept: list[str] = []
    for key in keys:
        if not any(len({(json.dumps(f.get(key)), json.dumps(f.get(other))) for f in flats})
                   == len({json.dumps(f.get(key)) for f in flats}) == len({json.dumps(f.get(other)) for f in flats})
                   for other in kept):
            kept.append(key)
    return tuple(kept)


def line_parameter(sweep: Sweep, parameter: str) -> str | None:
    """The parameter whose values make the lines of `parameter`'s chart: the first other swept one."""
    return next((p for p in sweep.parameters if p != parameter), None)


def profile(sweep: Sweep, parameter: str) -> pd.DataFrame:
    """The points of `parameter`'s chart: per (value of `parameter`, value of the line parameter) the best variant
    among those with these values (the others swept parameters free): x, line, retriever, value, may_be_best; x in
    its own order (numbers ascending)."""
    line = line_parameter(sweep, parameter)
    frame = sweep.frame.assign(x=sweep.frame[parameter].map(_label),
                               line=sweep.frame[line].map(_label) if line else "")
    best = frame.sort_values(["value", "retriever"], ascending=[False, True]).groupby(["x", "line"], sort=False).head(1)
    order = {label: i for i, label in enumerate(axis_values(sweep.frame[parameter]))}
    best = best.assign(position=best["x"].map(order)).sort_values(["line", "position"])
    return best[["x", "line", "retriever", "value", "may_be_best"]].reset_index(drop=True)


def axis_values(values: pd.Series) -> list[str]:
    """The labels of a parameter's values in axis order: numbers ascending when every value is a number, else as
    first seen."""
    distinct = list(dict.fromkeys(values.tolist()))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in distinct):
        distinct = sorted(distinct)
    return [_label(v) for v in distinct]


@dataclass(frozen=True)
class SweepChart:
    name: str  # the PNG's stem: sweep_<kind>_<parameter>, anything but letters, digits and _ as _
    sweep: Sweep
    parameter: str  # on the x axis
    line: str | None  # one line per value of this one
    metric: str  # e.g. ndcg@10
    title: str

    def points(self) -> pd.DataFrame:
        return profile(self.sweep, self.parameter)

    def x_values(self) -> list[str]:
        return axis_values(self.sweep.frame[self.parameter])


def charted_ranking(rankings: Sequence[KRanking], k: int) -> KRanking | None:
    """The ranking the sweep charts show: the one at `k` (the report's k), else the first."""
    return next((r for r in rankings if r.k == k), rankings[0] if rankings else None)


def sweep_charts(config: Mapping[str, Any], ranking: KRanking) -> list[SweepChart]:
    """One chart per swept parameter of each kind (sweeps), at the ranking's k."""
    metric = f"{ranking.metric.removesuffix('@k')}@{ranking.k}"
    charts = []
    for sweep in sweeps(config, ranking):
        for parameter in sweep.parameters:
            line = line_parameter(sweep, parameter)
            title = (f"{metric} against {parameter} ({sweep.kind} variants)"
                     + (f", one line per {line}" if line else "")
                     + ("\neach point the best variant with those values" if len(sweep.parameters) > 2 else ""))
            name = re.sub(r"[^A-Za-z0-9_]", "_", f"sweep_{sweep.kind}_{parameter}")
            charts.append(SweepChart(name, sweep, parameter, line, metric, title))
    return charts


def sweep_markdown(charts: Sequence[SweepChart], charts_dir: str, level: str = "###") -> str:
    """Per chart, a table of its points (rows: the parameter's values; columns: the line parameter's; a member of
    the confidence set in bold) and the chart itself from `charts_dir`."""
    parts = []
    for chart in charts:
        points = chart.points()
        columns = list(dict.fromkeys(points["line"]))
        cells = {(p.x, p.line): f"**{p.value:.4f}**" if p.may_be_best else f"{p.value:.4f}"
                 for p in points.itertuples(index=False)}
        rows = [[x, *(cells.get((x, c), "—") for c in columns)] for x in chart.x_values()]
        headers = [chart.parameter, *([f"{chart.line} = {c}" for c in columns] if chart.line else [chart.metric])]
        parts += [f"{level} {chart.title.splitlines()[0]}", markdown_table(headers, rows),
                  f"![{chart.title.splitlines()[0]}]({charts_dir}/{chart.name}.png)"]
    return "\n\n".join(parts)


def _flat(version: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A version as dotted keys: nested mappings and lists of them by key and position (of.0.k1)."""
    out: dict[str, Any] = {}
    for key, value in version.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out |= _flat(value, f"{name}.")
        elif isinstance(value, list) and all(isinstance(v, Mapping) for v in value):
            out |= _flat({str(i): v for i, v in enumerate(value)}, f"{name}.")
        else:
            out[name] = value
    return out


def _label(value: Any) -> str:
    return "—" if value is None else value if isinstance(value, str) else json.dumps(value)
