#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 42eb1956cad7240dc5b1b7fb9c723e4b5dddce1c
git checkout 42eb1956cad7240dc5b1b7fb9c723e4b5dddce1c -- tests/test_evaluator.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_evaluator.py b/tests/test_evaluator.py
index 4428364..c10a735 100644
--- a/tests/test_evaluator.py
+++ b/tests/test_evaluator.py
@@ -51,6 +51,8 @@ def test_wrong_arity():
 def test_division_by_zero():
     with pytest.raises(EvalError, match="division by zero"):
         evaluate("1 / 0")
+    with pytest.raises(EvalError, match="division by zero"):
+        evaluate("1 % 0")
 
 
 def test_domain_errors_are_eval_errors():
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_evaluator.py
: '>>>>> End Test Output'
git checkout 42eb1956cad7240dc5b1b7fb9c723e4b5dddce1c -- tests/test_evaluator.py
