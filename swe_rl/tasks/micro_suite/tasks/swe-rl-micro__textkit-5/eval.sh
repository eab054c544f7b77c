#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 41172bd08fa578d2ebd538b525905d1117374690
git checkout 41172bd08fa578d2ebd538b525905d1117374690 -- tests/test_wrap.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_wrap.py b/tests/test_wrap.py
index b2892e2..06415bc 100644
--- a/tests/test_wrap.py
+++ b/tests/test_wrap.py
@@ -7,6 +7,10 @@ def test_wrap_basic():
     assert wrap("the quick brown fox jumps", width=10) == ["the quick", "brown fox", "jumps"]
 
 
+def test_wrap_line_of_exact_width_is_kept():
+    assert wrap("abcde fghij", width=11) == ["abcde fghij"]
+
+
 def test_wrap_long_word_stays_whole():
     assert wrap("a supercalifragilistic word", width=5) == ["a", "supercalifragilistic", "word"]
 
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_wrap.py
: '>>>>> End Test Output'
git checkout 41172bd08fa578d2ebd538b525905d1117374690 -- tests/test_wrap.py
