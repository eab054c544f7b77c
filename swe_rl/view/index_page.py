"""The index page: the run's summary (resolve rate, Pass@k, per-repo and per-node tables as report.md computes
them; a training run's step curves as inline SVG), then the episode table that assets/index.js draws from
index-data.js a page of rows at a time (filters, sort, pagination), so 2,000 episodes open as fast as 100.
"""

from __future__ import annotations

import json
import time
from typing import Any

from swe_rl.evaluation.report import Episode as ReportEpisode
from swe_rl.evaluation.report import build_report
from swe_rl.view.episode_page import esc, page
from swe_rl.view.load import RunInfo

# training curves: (metrics.jsonl key, title); α is AEM's token-mean coefficient (1 where AEM is off)
CURVES = [("reward_mean", "reward"), ("resolve_rate", "resolve rate"), ("valid_frac", "scored share"),
          ("entropy_mean", "entropy (mean, policy tokens)"), ("algo/aem/alpha_token_mean", "AEM α (token mean)"),
          ("eval/greedy_success", "held-out success (greedy)")]  # fmt: skip
STEP_COLUMNS = [("reward_mean", "reward"), ("resolve_rate", "resolve rate"), ("valid_frac", "scored"),
                ("entropy_mean", "entropy"), ("algo/aem/alpha_token_mean", "α")]  # fmt: skip


def summary(info: RunInfo, eps: list[ReportEpisode]) -> dict[str, Any]:
    """report.json's numbers over the episodes present (an unfinished run: those written so far)."""
    runs = int(info.config.get("runs") or 0) if info.kind == "eval" else 1
    runs = max([runs, *(e.run + 1 for e in eps)]) if eps else runs
    return build_report(eps, runs, {"name": info.name})


def render_index(info: RunInfo, report: dict[str, Any], n_rows: int) -> str:
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    parts = [f'<header><h1>{esc(info.name)}</h1><p class="muted">{_kind_line(info)} · <code>{esc(info.root.resolve())}</code>'
             f" · built {built}</p></header>"]  # fmt: skip
    if info.warnings:
        items = "".join(f"<li>{esc(w)}</li>" for w in info.warnings[:50])
        more = f"<li>… {len(info.warnings) - 50} more</li>" if len(info.warnings) > 50 else ""
        parts.append(f'<section id="warnings"><h2>Warnings</h2><ul>{items}{more}</ul></section>')
    if info.kind == "train":
        parts.append(_training(info.metrics))
    if report["episodes"]:
        title = "Held-out and step episodes" if info.kind == "train" else "Summary"
        group = "episodes of" if info.kind == "train" else "repo"
        cards = _cards(report, info.kind != "train")  # Pass@k: k samples of one instance, not a step's groups
        tables = _repos(report, group) + _nodes(report)
        parts.append(f'<section id="summary"><h2>{title}</h2>{cards}{tables}</section>')
    parts.append(
        f'<section id="episodes"><h2>Episodes (<span id="shown">{n_rows}</span> of {n_rows})</h2>'
        '<div id="filters"></div><table id="table"><thead></thead><tbody></tbody></table>'
        '<div id="pager"></div><noscript>The episode table needs JavaScript; every episode page is under '
        "episodes/.</noscript></section>"
    )
    head = '<script src="index-data.js"></script><script defer src="assets/index.js"></script>'
    return page(f"{info.name} · swe-rl view", "index", "\n".join(parts), "", head)


def _kind_line(info: RunInfo) -> str:
    what = {"eval": "evaluation run", "train": "training run", "grade": "swe-rl grade output"}[info.kind]
    if info.kind == "eval":
        ds = (info.config.get("dataset") or {}).get("source", "")
        what += (
            f" · dataset <code>{esc(ds)}</code> · model <code>{esc(info.config.get('model_name', ''))}</code>"
        )
    return what


def _cards(r: dict[str, Any], pass_k: bool) -> str:
    c = r["counts"]
    lo, hi = r["resolve_rate_ci95"]
    cards = [
        ("episodes", r["episodes"], "episodes"),
        ("resolved", c["resolved"], "resolved-count"),
        ("resolve rate", f"{r['resolve_rate']:.1%}", "resolve-rate"),
        ("95% CI", f"{lo:.1%} – {hi:.1%}", "ci"),
    ]
    if pass_k:
        cards += [("Pass@1 (mean over runs)", f"{r['pass@1_mean_over_runs']:.1%}", "pass1")]
        cards += [(f"Pass@{k}", f"{v:.1%}", f"pass-at-{k}") for k, v in r["pass@k"].items()]
    cards += [("unresolved", c["unresolved"], "unresolved-count"), ("empty patch", c["empty_patch"], "empty-count"),
              ("infra failure", c["infra_failure"], "infra-count"), ("suspicious", len(r["suspicious"]), "suspicious-count")]  # fmt: skip
    html = "".join(f'<div class="card"><div class="v" id="{i}">{esc(v)}</div><div class="k">{k}</div></div>'
                   for k, v, i in cards)  # fmt: skip
    if r["infra_failure_labels"]:
        kinds = ", ".join(f"{esc(k)} ×{v}" for k, v in r["infra_failure_labels"].items())
        html += f'<p class="muted">infrastructure failures: {kinds}</p>'
    return f'<div class="cards">{html}</div>'


def _repos(r: dict[str, Any], group: str) -> str:
    rows = "".join(f"<tr><td>{esc(k or '(none)')}</td><td>{v['episodes']}</td><td>{v['resolved']}</td>"
                   f"<td>{v['resolve_rate']:.1%}</td></tr>" for k, v in r["per_repo"].items())  # fmt: skip
    return (f'<table id="per-repo"><thead><tr><th>{group}</th><th>episodes</th><th>resolved</th><th>resolve rate</th>'
            f"</tr></thead><tbody>{rows}</tbody></table>")  # fmt: skip


def _nodes(r: dict[str, Any]) -> str:
    """Episodes per Ray node (report.json's per_node), past one node: a broken node shows as its failures."""
    if len(r.get("per_node") or {}) < 2:
        return ""
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{v['episodes']}</td><td>{v['resolved']}</td>"
                   f"<td>{v['infra_failure']}</td></tr>" for k, v in r["per_node"].items())  # fmt: skip
    return ('<table id="per-node"><thead><tr><th>node</th><th>episodes</th><th>resolved</th><th>infra failure</th>'
            f"</tr></thead><tbody>{rows}</tbody></table>")  # fmt: skip


def _training(metrics: list[dict[str, Any]]) -> str:
    charts = []
    for key, title in CURVES:
        pts = [(row["step"], row[key]) for row in metrics if isinstance(row.get(key), (int, float))
               and isinstance(row.get("step"), int)]  # fmt: skip
        if pts:
            charts.append(f'<figure class="chart" data-key="{esc(key)}">{line_svg(pts)}<figcaption>{esc(title)}'
                          f"</figcaption></figure>")  # fmt: skip
    steps = sorted(
        {row["step"] for row in metrics if isinstance(row.get("step"), int) and "reward_mean" in row}
    )
    by_step = {row["step"]: row for row in metrics if "reward_mean" in row}
    head = "".join(f"<th>{t}</th>" for _, t in STEP_COLUMNS)
    body = "".join(
        f'<tr><td><a href="#step={s}">step {s}</a></td>'
        + "".join(f"<td>{_fmt(by_step[s].get(k))}</td>" for k, _ in STEP_COLUMNS)
        + "</tr>"
        for s in steps
    )
    table = f'<table id="steps"><thead><tr><th>step (its episodes)</th>{head}</tr></thead><tbody>{body}</tbody></table>'
    inner = (
        f'<div class="charts">{"".join(charts)}</div>{table}'
        if charts
        else '<p class="muted">no steps yet</p>'
    )
    return f'<section id="training"><h2>Training ({len(steps)} steps)</h2>{inner}</section>'


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else esc(v if v is not None else "–")


def line_svg(pts: list[tuple[int, float]], w: int = 300, h: int = 150) -> str:
    """A small line chart (axis labels at the ends): no library, so the page needs nothing from the network."""
    xs, ys = [p[0] for p in pts], [float(p[1]) for p in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min([*ys, 0.0]), max(ys)
    y1 = y1 if y1 > y0 else y0 + 1.0
    pad_l, pad_b, pad_t, pad_r = 40, 18, 8, 8

    def sx(x: float) -> float:
        return pad_l + (x - x0) / ((x1 - x0) or 1) * (w - pad_l - pad_r)

    def sy(y: float) -> float:
        return h - pad_b - (y - y0) / (y1 - y0) * (h - pad_b - pad_t)

    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys, strict=True))
    dots = "".join(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5"><title>step {x}: {y:.4g}</title></circle>'
                   for x, y in zip(xs, ys, strict=True))  # fmt: skip
    return (
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">'
        f'<line class="axis" x1="{pad_l}" y1="{h - pad_b}" x2="{w - pad_r}" y2="{h - pad_b}"/>'
        f'<line class="axis" x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}"/>'
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end">{y1:.3g}</text>'
        f'<text x="{pad_l - 4}" y="{h - pad_b}" text-anchor="end">{y0:.3g}</text>'
        f'<text x="{pad_l}" y="{h - 4}">{x0}</text><text x="{w - pad_r}" y="{h - 4}" text-anchor="end">{x1}</text>'
        f'<polyline points="{path}"/>{dots}</svg>'
    )


def data_js(columns: list[str], rows: list[list[Any]]) -> str:
    """index-data.js: a script, not JSON fetched at run time (a page opened from disk may not fetch files)."""
    return (
        "window.VIEW_DATA = " + json.dumps({"columns": columns, "rows": rows}, separators=(",", ":")) + ";\n"
    )
