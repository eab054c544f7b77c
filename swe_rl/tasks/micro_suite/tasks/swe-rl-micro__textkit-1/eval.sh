#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 9bcd9acc828082902a1ed1b56c40a6bb2444ca23
git checkout 9bcd9acc828082902a1ed1b56c40a6bb2444ca23 -- tests/test_slug.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_slug.py b/tests/test_slug.py
index 0d8cc7b..0340f03 100644
--- a/tests/test_slug.py
+++ b/tests/test_slug.py
@@ -31,6 +31,15 @@ def test_max_length_cuts():
     assert slugify("abcdefghij", max_length=4) == "abcd"
 
 
+def test_max_length_never_ends_with_separator():
+    assert slugify("hello world again", max_length=6) == "hello"
+    assert slugify("hello world again", max_length=12) == "hello-world"
+
+
+def test_max_length_with_custom_separator():
+    assert slugify("one two three", sep="__", max_length=5) == "one"
+
+
 def test_rejects_non_string():
     with pytest.raises(TypeError):
         slugify(42)
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_slug.py
: '>>>>> End Test Output'
git checkout 9bcd9acc828082902a1ed1b56c40a6bb2444ca23 -- tests/test_slug.py
