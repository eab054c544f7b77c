"""swe_rl.grading.install_skip: the eval script's editable install is guarded only for a patch it cannot concern
(the graded run and the fail-fast pre-run use it). Real-instance verdicts with it: bench/grading.py --only cost
and tests/real (every real gold / empty / no-op patch graded as the official harness grades it)."""

from __future__ import annotations

from swe_rl.grading import install_skip as inst

SCRIPT = (
    "#!/bin/bash\nset -uxo pipefail\ncd /testbed\ngit status\npython -m pip install -e .\n"
    ": '>>>>> Start Test Output'\npytest -rA tests/test_a.py\n: '>>>>> End Test Output'\n"
)
CFG = "[metadata]\nversion = attr: pkg.__version__\n[options]\npackages = find:\n"


def test_a_source_patch_guards_the_install_behind_the_in_sandbox_check():
    script, install = inst.guarded(SCRIPT, ("pkg/core.py", "tests/test_a.py"), CFG)
    assert install == "skipped if these import from /testbed: pkg"
    assert "then : swe-rl: install unchanged; else python -m pip install -e .; fi" in script
    assert "python -I -c" in script and script.endswith(SCRIPT.split("git status\n", 1)[1].split("\n", 1)[1])
    assert "\ngit status\n" in script  # the graded run keeps every other line


def test_the_install_runs_whenever_the_patch_may_concern_it():
    for touched in (
        ("setup.py",),
        ("pkg/__init__.py",),  # named by setup.cfg (version = attr: pkg.__version__)
        ("pkg/ext.pyx",),
        ("newmod.py",),
        ("src/x.py",),
        ("pkg/wcs/setup_package.py",),  # a build script inside a package (astropy's extension helpers)
    ):
        assert inst.guarded(SCRIPT, touched, CFG) == (SCRIPT, "kept"), touched
    assert inst.guarded(SCRIPT, None, CFG) == (SCRIPT, "kept")  # no tree guard: nothing known
    assert inst.guarded(SCRIPT, ("pkg/core.py",), inst.UNKNOWN) == (SCRIPT, "kept")  # packaging unread
    other = SCRIPT.replace("git status\n", "git status\npython setup.py build_ext -i\n")
    assert inst.guarded(other, ("pkg/core.py",), CFG) == (other, "kept")
    assert (
        inst.guarded(SCRIPT.replace("python -m pip install -e .\n", ""), ("pkg/core.py",), CFG)[1] == "none"
    )
