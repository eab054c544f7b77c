#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 5a59473e351ec50eececde474812ad02233bb9f9
git checkout 5a59473e351ec50eececde474812ad02233bb9f9 -- tests/test_durations.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_durations.py b/tests/test_durations.py
index 3b2dbb3..90e476f 100644
--- a/tests/test_durations.py
+++ b/tests/test_durations.py
@@ -12,14 +12,19 @@ def test_parse_bare_number_is_seconds():
     assert parse_duration("90") == 90
 
 
-def test_parse_fractional():
+def test_parse_fractional_and_ms():
     assert parse_duration("1.5h") == 5400
+    assert parse_duration("250ms") == pytest.approx(0.25)
 
 
 def test_parse_is_case_insensitive():
     assert parse_duration("1H30M") == 5400
 
 
+def test_parse_minutes_and_milliseconds_are_distinct():
+    assert parse_duration("1m500ms") == pytest.approx(60.5)
+
+
 @pytest.mark.parametrize("bad", ["", "abc", "1x", "h1", "1h2q", "1h-2q"])
 def test_parse_rejects_garbage(bad):
     with pytest.raises(ValueError):
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_durations.py
: '>>>>> End Test Output'
git checkout 5a59473e351ec50eececde474812ad02233bb9f9 -- tests/test_durations.py
