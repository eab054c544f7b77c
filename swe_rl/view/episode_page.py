"""An episode's page: header, problem statement, turns, the final patch as a coloured diff, the grading, raw files.

Static HTML (no script): it renders from disk, in any browser, one page per episode. Pages live two folders below
view/ (view/episodes/<group>/<name>.html), so the stylesheet is ../../assets/ and the run's files ../../../.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from swe_rl.view.episode import Episode, Turn

FOLD_LINES, FOLD_CHARS = 25, 2500  # observations longer than this start folded
OUTCOME_LABEL = {"resolved": "resolved", "unresolved": "unresolved", "empty_patch": "empty patch",
                 "infra_failure": "infrastructure failure"}  # fmt: skip


def esc(v: Any) -> str:
    return escape(str(v), quote=True)


def num(v: Any, fmt: str = "{:.3f}") -> str:
    return "–" if v is None else (fmt.format(v) if isinstance(v, float) else esc(v))


def render_episode(
    ep: Episode, run_name: str, root_rel: str = "../../../", siblings: list[str] | None = None
) -> str:
    """`root_rel`: the run folder seen from the page (its raw-file links); `siblings`: the page keys of the same
    instance's other runs (an evaluation with k > 1), linked from the header."""
    facts = [
        ("repo", esc(ep.repo or "–")),
        (
            "step" if ep.kind in ("train", "heldout") else "run",
            esc(ep.step if ep.step is not None else ep.sample),
        ),
        ("sample", esc(ep.sample)) if ep.kind in ("train", "heldout") else None,
        ("held-out mode", esc(ep.mode)) if ep.mode else None,
        ("exit", f'<span id="exit">{esc(ep.exit)}</span>'),
        ("turns", esc(ep.steps)) if ep.kind != "grade" else None,
        ("tokens", esc(ep.tokens)) if ep.kind != "grade" else None,
        ("reward", f'<span id="reward">{num(ep.reward, "{:g}")}</span>'),
        ("failure", esc(ep.failure)) if ep.failure else None,
        ("node", esc(ep.node)) if ep.node else None,
        ("other runs", " · ".join(f'<a href="../../episodes/{esc(k)}.html">{esc(k.split("/")[0].replace("_", " "))}</a>'
                                  for k in siblings)) if siblings else None,
    ]  # fmt: skip
    badge = (
        f'<span id="outcome" class="badge o-{ep.outcome}">{OUTCOME_LABEL.get(ep.outcome, ep.outcome)}</span>'
    )
    sus = "".join(
        f'<span class="badge o-suspicious" title="{esc(r)}">suspicious</span>' for r in ep.suspicious[:1]
    )
    parts = [
        f'<nav><a href="../../index.html">← {esc(run_name)}</a></nav>',
        f'<header><h1>{esc(ep.instance)}</h1>{badge}{sus}<dl class="facts">'
        + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in (f for f in facts if f))
        + "</dl></header>",
        _section("problem", "Problem statement", _problem(ep)),
        _section("turns", f"Turns ({len(ep.turns)})", _turns(ep)) if ep.kind != "grade" else "",
        _section("patch", "Final patch", diff_html(ep.patch)),
        _section("grading", "Grading", grading_html(ep)),
        _section("raw", "Raw files", _raw(ep, root_rel)),
    ]
    return page(f"{ep.instance} · {run_name}", "episode", "\n".join(parts), "../../")


def page(title: str, cls: str, body: str, up: str, head: str = "") -> str:
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="{up}assets/view.css">{head}</head>\n<body class="{cls}">\n{body}\n</body></html>\n'
    )


def _section(sid: str, title: str, inner: str) -> str:
    return f'<section id="{sid}"><h2>{title}</h2>{inner}</section>'


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


def _folded(label: str, text: str, cls: str = "obs") -> str:
    lines = text.count("\n") + 1
    opened = "" if lines > FOLD_LINES or len(text) > FOLD_CHARS else " open"
    return (f'<details class="{cls}"{opened}><summary>{label} · {lines} lines, {len(text):,} chars</summary>'
            f"{_pre(text)}</details>")  # fmt: skip


def _problem(ep: Episode) -> str:
    if not ep.problem:
        return (
            '<p class="muted">not in this folder (a swe-rl grade output keeps patches and test results)</p>'
        )
    out = _pre(ep.problem, "prose")
    if ep.system:
        out += _folded("system prompt", ep.system, "prompt")
    if ep.prompt and ep.prompt != ep.problem:
        out += _folded("task prompt as the agent saw it", ep.prompt, "prompt")
    return out


def _turns(ep: Episode) -> str:
    if not ep.turns:
        return '<p class="muted">no turns recorded</p>'
    return "\n".join(_turn(t) for t in ep.turns)


def _turn(t: Turn) -> str:
    meta = [f"{t.tokens} tokens" if t.tokens is not None else None,
            f"mean entropy {t.entropy:.3f}" if t.entropy is not None else None,
            f"α {t.alpha:.3f}" if t.alpha is not None else None,
            f"advantage {t.advantage:+.3f}" if t.advantage is not None else None,
            f"finish {t.finish}" if t.finish and t.finish != "stop" else None]  # fmt: skip
    name = (t.action or {}).get("name")
    tool = f'<span class="tool">{esc(name)}</span>' if name else ""
    body = [f'<h3>Turn {t.index} {tool}<span class="meta">{" · ".join(m for m in meta if m)}</span></h3>']
    if t.reasoning:
        body.append(f'<div class="reasoning">{_pre(t.reasoning)}</div>')
    if t.action:
        params = t.action.get("params") or {}
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{_pre(str(v))}</td></tr>" for k, v in params.items())
        body.append(f'<div class="call"><table>{rows}</table></div>' if rows else "")
    elif t.parse_error:
        body.append(f'<div class="call error">no valid call: {esc(t.parse_error)}</div>{_pre(t.reply)}')
    if t.observation is not None:
        body.append(_folded("observation", t.observation))
    return f'<article class="turn" id="turn-{t.index}">{"".join(body)}</article>'


def diff_html(patch: str | None) -> str:
    if patch is None:
        return '<p class="muted">this record keeps no patch (training step records keep the transcript)</p>'
    if not patch.strip():
        return '<p class="muted">empty patch</p>'
    out = []
    for line in patch.split("\n"):
        cls = ("f" if line.startswith(("diff --git", "--- ", "+++ ", "index ", "new file", "deleted file"))
               else "h" if line.startswith("@@") else "a" if line.startswith("+")
               else "d" if line.startswith("-") else "")  # fmt: skip
        out.append(f'<span class="{cls}">{esc(line)}</span>' if cls else esc(line))
    return f'<pre class="diff">{chr(10).join(out)}</pre>'


def test_rows(tests: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(set, test, status, note) for FAIL_TO_PASS / PASS_TO_PASS: swebench's tests_status (success/failure lists)
    or the trainer's {test: PASSED/FAILED}, then the tests validation left out (with their reasons)."""
    rows: list[tuple[str, str, str, str]] = []
    status = tests.get("tests_status") or {}
    for kind in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        got = status.get(kind) or {}
        rows += [(kind, t, "passed", "") for t in got.get("success") or []]
        rows += [(kind, t, "failed", "") for t in got.get("failure") or []]
        plain = tests.get(kind)
        if isinstance(plain, dict):
            rows += [(kind, t, "passed" if s == "PASSED" else "failed", "" if s in ("PASSED", "FAILED") else s)
                     for t, s in plain.items()]  # fmt: skip
    val = tests.get("validation") or {}
    rows += [("PASS_TO_PASS", x.get("test", "?"), "left out", f"{x.get('reason')}: {x.get('line')}")
             for x in val.get("left_out") or []]  # fmt: skip
    return rows


def grading_html(ep: Episode) -> str:
    t = ep.tests
    out = []
    rows = test_rows(t)
    if rows:
        # FAIL_TO_PASS and every PASS_TO_PASS test that did not pass first; the passing PASS_TO_PASS (hundreds on
        # a real instance) in a second table, folded
        first = [r for r in rows if r[0] == "FAIL_TO_PASS" or r[2] != "passed"]
        rest = [r for r in rows if r not in first]
        out.append(_tests_table(first, "tests"))
        if rest:
            out.append(f'<details class="p2p"><summary>{len(rest)} PASS_TO_PASS tests passed</summary>'
                       f"{_tests_table(rest, 'tests p2p-passed')}</details>")  # fmt: skip
    else:
        out.append(
            '<p class="muted">no test results (not graded, or the grading failed before the tests)</p>'
        )
    val = t.get("validation") or {}
    if val.get("summary") or val.get("ungradeable"):
        out.append(
            f'<p class="validation">validation: {esc(val.get("ungradeable") or val.get("summary"))}</p>'
        )
    for g in val.get("gold_failing") or []:
        out.append(
            f'<p class="validation">kept, gold fails it too: {esc(g.get("test"))} ({esc(g.get("why"))})</p>'
        )
    out.append(_integrity(ep))
    caused = t.get("patch_caused")
    if caused:
        out.append(f"<p>the patch caused: {esc(json.dumps(caused))}</p>")
    if ep.error:
        out.append(_folded("infrastructure error", ep.error, "error"))
    if ep.log_tail:
        out.append(f"<h3>Log tail</h3>{_pre(ep.log_tail, 'log')}")
    return "".join(out)


def _tests_table(rows: list[tuple[str, str, str, str]], cls: str) -> str:
    body = "".join(f'<tr class="s-{s.replace(" ", "-")}"><td>{k}</td><td class="test">{esc(n)}</td>'
                   f'<td class="status">{s}</td><td>{esc(note)}</td></tr>' for k, n, s, note in rows)  # fmt: skip
    return (f'<table class="{cls}"><thead><tr><th>set</th><th>test</th><th>status</th><th>note</th></tr>'
            f"</thead><tbody>{body}</tbody></table>")  # fmt: skip


def _integrity(ep: Episode) -> str:
    integ = dict(ep.tests.get("integrity") or {})
    if ep.tests.get("violations"):
        integ["violations"] = ep.tests["violations"]
    labels = list(dict.fromkeys([*ep.suspicious, *(integ.pop("suspicious", None) or [])]))
    out = ['<h3>Integrity</h3><ul class="labels">']
    out += [f'<li class="label-suspicious">suspicious: {esc(r)}</li>' for r in labels] or [
        "<li>no labels</li>"
    ]
    out.append("</ul>")
    evidence = {k: v for k, v in integ.items() if v not in (None, [], {}, "", "none", "kept")}
    if evidence:
        out.append('<table class="evidence">' + "".join(
            f"<tr><th>{esc(k)}</th><td>{_pre(json.dumps(v, indent=1) if not isinstance(v, str) else v)}</td></tr>"
            for k, v in evidence.items()) + "</table>")  # fmt: skip
    return "".join(out)


def _raw(ep: Episode, root_rel: str) -> str:
    if not ep.raw:
        return '<p class="muted">no files</p>'
    items = "".join(
        f'<li><a href="{esc(root_rel + p)}">{esc(label)}</a> <code>{esc(p)}</code></li>'
        for label, p in ep.raw
    )
    return f"<ul>{items}</ul>"
