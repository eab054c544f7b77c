#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 2efd6c81e91451e3c1ea2291903f8e778aa74021
git checkout 2efd6c81e91451e3c1ea2291903f8e778aa74021 -- tests/test_evaluator.py tests/test_parser.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_evaluator.py b/tests/test_evaluator.py
index 3c5109b..c10a735 100644
--- a/tests/test_evaluator.py
+++ b/tests/test_evaluator.py
@@ -11,6 +11,10 @@ def test_arithmetic():
     assert evaluate("10 / 4") == 2.5
 
 
+def test_power_chain():
+    assert evaluate("2 ^ 3 ^ 2") == 512.0
+
+
 def test_unary_minus_and_power():
     assert evaluate("-2 ^ 2") == -4.0
     assert evaluate("2 * -3") == -6.0
diff --git a/tests/test_parser.py b/tests/test_parser.py
index 212d8fe..3b42189 100644
--- a/tests/test_parser.py
+++ b/tests/test_parser.py
@@ -12,6 +12,10 @@ def test_left_associative_subtraction():
     assert parse("8 - 3 - 2") == Binary("-", Binary("-", Num(8.0), Num(3.0)), Num(2.0))
 
 
+def test_power_is_right_associative():
+    assert parse("2 ^ 3 ^ 2") == Binary("^", Num(2.0), Binary("^", Num(3.0), Num(2.0)))
+
+
 def test_unary_minus_binds_looser_than_power():
     assert parse("-2 ^ 2") == Unary("-", Binary("^", Num(2.0), Num(2.0)))
 
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_evaluator.py tests/test_parser.py
: '>>>>> End Test Output'
git checkout 2efd6c81e91451e3c1ea2291903f8e778aa74021 -- tests/test_evaluator.py tests/test_parser.py
