#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 46fcb7dfce1a8f033c1658f8e5b869324eacc668
git checkout 46fcb7dfce1a8f033c1658f8e5b869324eacc668 -- tests/test_evaluator.py tests/test_parser.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_evaluator.py b/tests/test_evaluator.py
index f18bf7a..c10a735 100644
--- a/tests/test_evaluator.py
+++ b/tests/test_evaluator.py
@@ -15,7 +15,8 @@ def test_power_chain():
     assert evaluate("2 ^ 3 ^ 2") == 512.0
 
 
-def test_unary_minus():
+def test_unary_minus_and_power():
+    assert evaluate("-2 ^ 2") == -4.0
     assert evaluate("2 * -3") == -6.0
 
 
diff --git a/tests/test_parser.py b/tests/test_parser.py
index 4d9204b..3b42189 100644
--- a/tests/test_parser.py
+++ b/tests/test_parser.py
@@ -16,6 +16,10 @@ def test_power_is_right_associative():
     assert parse("2 ^ 3 ^ 2") == Binary("^", Num(2.0), Binary("^", Num(3.0), Num(2.0)))
 
 
+def test_unary_minus_binds_looser_than_power():
+    assert parse("-2 ^ 2") == Unary("-", Binary("^", Num(2.0), Num(2.0)))
+
+
 def test_call_with_arguments():
     assert parse("max(a, 2)") == Call("max", (Var("a"), Num(2.0)))
     assert parse("f()") == Call("f", ())
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_evaluator.py tests/test_parser.py
: '>>>>> End Test Output'
git checkout 46fcb7dfce1a8f033c1658f8e5b869324eacc668 -- tests/test_evaluator.py tests/test_parser.py
