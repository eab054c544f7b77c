#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 6dae68e2115ee9e2187a82b24793be443d89c32a
git checkout 6dae68e2115ee9e2187a82b24793be443d89c32a -- tests/test_parser.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_parser.py b/tests/test_parser.py
index 9dd7a77..3b42189 100644
--- a/tests/test_parser.py
+++ b/tests/test_parser.py
@@ -22,6 +22,7 @@ def test_unary_minus_binds_looser_than_power():
 
 def test_call_with_arguments():
     assert parse("max(a, 2)") == Call("max", (Var("a"), Num(2.0)))
+    assert parse("f()") == Call("f", ())
 
 
 def test_parentheses():
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_parser.py
: '>>>>> End Test Output'
git checkout 6dae68e2115ee9e2187a82b24793be443d89c32a -- tests/test_parser.py
