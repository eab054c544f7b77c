"""Host side of the probe run's observers (swe_rl.integrity.probe): ship one into a grading sandbox outside /testbed
under a fresh name, enable it for the probe run's test command, read back its signed records.

    check = await install(sb, "pytest", select=task.FAIL_TO_PASS)   # after the graded run, same sandbox
    script = with_exports(official_script(task), check.exports)       # the same eval script, plus the observer
    records = await read_records(sb, check)                           # started / outcome / report records

Observers, by the runner of the eval script's test command:
- `pytest`: trusted_check_plugin.py, a pytest plugin loaded with `-p` under a nonce module name, with pytest's
  assertion-pass hook on (pytest >= 5); it deselects every test but the selected ones.
- `unittest` (django's tests/runtests.py) and `sympy` (bin/test): runner_probe_site.py, shipped as the
  `sitecustomize` of a folder put first on PYTHONPATH: it records what unittest's TestCase.run reports to the
  runner's result object, or what each sympy test function did, before the runner's own reporting sees it.

The observer's folder holds it, the value checks both share (trusted_values.py as `swe_rl_tv_<nonce>`), the
probe's own assertion observer (trusted_asserts.py as `swe_rl_ta_<nonce>`), `key` (an HMAC key the observer reads and deletes when it is imported, before
any code of the repository runs), `scope.json` (the repository root, the selected tests, the kind) and `touched`
(the files the patch touched, from the tree). Every record is one line `{"payload": ..., "mac": ...}` in a
`records-<pid>.jsonl` file of that folder; a line not signed with the key is counted as forged.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandboxes.base import Sandbox, SandboxError

PLUGIN = Path(__file__).with_name("trusted_check_plugin.py")
SITE = Path(__file__).with_name("runner_probe_site.py")
VALUES = Path(__file__).with_name("trusted_values.py")  # shared by both observers, shipped beside them
ASSERTS = Path(__file__).with_name(
    "trusted_asserts.py"
)  # the probe's own assertion observer, shipped beside them
FRAMES = Path(__file__).with_name("trusted_frames.py")  # frame access by patched code, outcomes' origin
SAME = Path(__file__).with_name("trusted_same.py")  # equal, but not the same value; class-reporting lies
KINDS = ("pytest", "unittest", "sympy")
# git, not the repository's config, lists what the patch left in the tree (quoted paths, external diff drivers off)
_GIT = "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c core.quotepath=off"


@dataclass(frozen=True)
class TrustedCheck:
    """One probe run's observer installation: where it lives, its module name and the key its records carry."""

    nonce: str
    key: str
    kind: str = "pytest"

    @property
    def dir(self) -> str:
        return f"/tmp/.swe_rl_tc_{self.nonce}"

    @property
    def module(self) -> str:
        return f"swe_rl_tc_{self.nonce}" if self.kind == "pytest" else "sitecustomize"

    @property
    def values_module(self) -> str:
        return f"swe_rl_tv_{self.nonce}"

    @property
    def asserts_module(self) -> str:
        return f"swe_rl_ta_{self.nonce}"

    @property
    def exports(self) -> str:
        """The shell line the probe run adds before its test command (kept: the image's own PYTHONPATH and
        PYTEST_ADDOPTS). pytest: PYTEST_PLUGINS loads the plugin too when the test command replaces
        PYTEST_ADDOPTS (pytest registers it once); the assertion-pass hook on, so the plugin sees every passing
        comparison's operands. sympy: a fixed PYTHONHASHSEED keeps bin/test's tests in its own process."""
        path = f'PYTHONPATH="{self.dir}${{PYTHONPATH:+:$PYTHONPATH}}"'
        if self.kind == "pytest":
            addopts = f"-p {self.module} -o enable_assertion_pass_hook=true"
            plugins = f'PYTEST_PLUGINS="{self.module}${{PYTEST_PLUGINS:+,$PYTEST_PLUGINS}}"'
            return f'export {path} PYTEST_ADDOPTS="{addopts} ${{PYTEST_ADDOPTS:-}}" {plugins}'
        if self.kind == "sympy":
            return f"export {path} PYTHONHASHSEED={int(self.nonce[:6], 16)}"
        return f"export {path}"

    @property
    def site_path(self) -> str:
        """Shell line putting the observer's folder on the current Python's path by a `.pth` file (read at every
        start of that Python): for a test command that starts its Python with a filtered environment (tox
        passes PYTEST_ADDOPTS, never PYTHONPATH), in the probe run's sandbox only, after the graded run."""
        where = "$(python -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
        return f'echo {shlex.quote(self.dir)} > "{where}/{self.module}.pth"'

    @property
    def before(self) -> str:
        """Shell run right before the probe run: pytest's cached rewrites of the test modules (written by the
        graded run with the assertion-pass hook off) are removed, so that pytest rewrites them with it on."""
        if self.kind != "pytest":
            return ""
        return "find /testbed -name '*-pytest-*.pyc' -delete 2>/dev/null; true"


def install_script(
    check: TrustedCheck, workdir: str, select: list[str], runner: list[str] | None = None
) -> str:
    """One shell command (run in `workdir`) that writes the observer, its scope (the root, the selected tests,
    the kind; and, NUL-separated, the paths the applied patch changed or added: tracked changes + untracked .py
    files) and its key (mode 600)."""
    d = shlex.quote(check.dir)
    agent = base64.b64encode((PLUGIN if check.kind == "pytest" else SITE).read_bytes()).decode()
    values = base64.b64encode(VALUES.read_bytes()).decode()
    asserts = base64.b64encode(ASSERTS.read_bytes()).decode()
    shipped = " && ".join(
        f"printf %s {base64.b64encode(path.read_bytes()).decode()} | base64 -d > {d}/swe_rl_{short}_{check.nonce}.py"
        for short, path in (("tf", FRAMES), ("ts", SAME))
    )
    doc = {"root": workdir, "select": select, "kind": check.kind, "runner": sorted(runner or [])}
    scope = base64.b64encode(json.dumps(doc).encode()).decode()
    touched = f"{_GIT} diff --name-only --no-renames -z HEAD; {_GIT} ls-files --others -z -- '*.py'"
    # the lines the patch added or changed (trusted_frames.Patched): new-side hunk ranges, no context
    diff = f"{_GIT} diff -U0 --no-renames --no-ext-diff --no-color HEAD > {d}/diff"
    return (
        f"mkdir -p {d} && {{ {touched}; }} > {d}/touched && {{ {diff} || :; }} && {shipped} && "
        f"printf %s {agent} | base64 -d > {d}/{check.module}.py && printf %s {values} | base64 -d > "
        f"{d}/{check.values_module}.py && printf %s {asserts} | base64 -d > {d}/{check.asserts_module}.py"
        f" && printf %s {scope} | base64 -d > {d}/scope.json"
        f" && (umask 077; printf %s {check.key} > {d}/key)"
    )


async def install(
    sb: Sandbox, kind: str, select: list[str], workdir: str = "/testbed", runner: list[str] | None = None
) -> TrustedCheck:
    """Write the observer of `kind`, its scope (`runner`: the repository's runner and test-support files and
    folders, swe_rl.integrity.tree.RUNNER_FILES) and its key into the sandbox (one exec)."""
    if kind not in KINDS:
        raise ValueError(f"probe kind: expected one of {KINDS}, got {kind!r}")
    check = TrustedCheck(nonce=secrets.token_hex(8), key=secrets.token_hex(16), kind=kind)
    res = await sb.exec(install_script(check, workdir, select, runner), cwd=workdir, timeout=120)
    if res.exit_code != 0:
        raise SandboxError(f"could not install the probe in {check.dir}: {res.output[-500:]}")
    return check


def verify(check: TrustedCheck, text: str) -> dict[str, Any] | None:
    """The payload of one record line, or None when it is not signed with this check's key."""
    try:
        doc = json.loads(text)
        payload, mac = doc["payload"], doc["mac"]
        want = hmac.new(check.key.encode(), payload.encode(), hashlib.sha256).hexdigest()
        body = json.loads(payload) if hmac.compare_digest(str(mac), want) else None
    except (ValueError, KeyError, TypeError):
        return None
    return body if isinstance(body, dict) else None


@dataclass
class Records:
    """What the observer wrote: whether it started (before any code of the repository ran), its end reports,
    its per-test outcome records, and the number of lines not signed with the key."""

    started: list[dict[str, Any]] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    forged: int = 0


def parse_records(check: TrustedCheck, text: str) -> Records:
    out = Records()
    for line in (ln for ln in text.splitlines() if ln.strip()):
        body = verify(check, line)
        if body is None:
            out.forged += 1
        elif body.get("type") in ("started", "report", "outcome"):
            getattr(
                out, {"started": "started", "report": "reports", "outcome": "outcomes"}[body["type"]]
            ).append(body)
    return out


async def read_records(sb: Sandbox, check: TrustedCheck) -> Records:
    """Every record line the observer's processes wrote; one exec."""
    d = shlex.quote(check.dir)
    res = await sb.exec(f'for f in {d}/records-*.jsonl; do [ -f "$f" ] && cat "$f"; done; true', timeout=60)
    return parse_records(check, res.output)
