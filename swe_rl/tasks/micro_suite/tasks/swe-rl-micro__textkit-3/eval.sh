#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 8caf1de2b8d6c92b0c340933a87c80c031666048
git checkout 8caf1de2b8d6c92b0c340933a87c80c031666048 -- tests/test_wrap.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_wrap.py b/tests/test_wrap.py
index be88021..06415bc 100644
--- a/tests/test_wrap.py
+++ b/tests/test_wrap.py
@@ -32,6 +32,20 @@ def test_truncate_exact_length_untouched():
     assert truncate("exactly10!", 10) == "exactly10!"
 
 
+def test_truncate_adds_suffix_within_length():
+    out = truncate("The quick brown fox", 10)
+    assert out == "The qui..."
+    assert len(out) == 10
+
+
+def test_truncate_custom_suffix():
+    assert truncate("abcdefghij", 6, suffix="~") == "abcde~"
+
+
+def test_truncate_suffix_longer_than_length():
+    assert truncate("abcdefghij", 2) == ".."
+
+
 def test_indent():
     assert indent("a\n\nb\n") == "    a\n\n    b\n"
     assert indent("a\n\nb", prefix="> ", skip_blank=False) == "> a\n> \n> b"
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_wrap.py
: '>>>>> End Test Output'
git checkout 8caf1de2b8d6c92b0c340933a87c80c031666048 -- tests/test_wrap.py
