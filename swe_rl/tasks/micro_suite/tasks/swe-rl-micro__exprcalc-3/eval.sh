#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 81c93b72e58c2e3aa70ef39ca76309b7bb91c7d2
git checkout 81c93b72e58c2e3aa70ef39ca76309b7bb91c7d2 -- tests/test_evaluator.py tests/test_tokenizer.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_evaluator.py b/tests/test_evaluator.py
index 80d3ca6..c10a735 100644
--- a/tests/test_evaluator.py
+++ b/tests/test_evaluator.py
@@ -25,6 +25,10 @@ def test_variables_and_constants():
     assert evaluate("pi") == pytest.approx(math.pi)
 
 
+def test_scientific_notation_values():
+    assert evaluate("1.5e-3 * 2") == pytest.approx(0.003)
+
+
 def test_functions():
     assert evaluate("max(a, b) / 2", {"a": 3, "b": 10}) == 5.0
     assert evaluate("min(4, 2, 8)") == 2.0
diff --git a/tests/test_tokenizer.py b/tests/test_tokenizer.py
index f4f13ba..ec1d6a6 100644
--- a/tests/test_tokenizer.py
+++ b/tests/test_tokenizer.py
@@ -15,6 +15,11 @@ def test_decimal_numbers():
     assert kinds("3.25 .5 7.") == [("NUMBER", "3.25"), ("NUMBER", ".5"), ("NUMBER", "7.")]
 
 
+def test_scientific_notation():
+    assert kinds("1.5e-3") == [("NUMBER", "1.5e-3")]
+    assert kinds("2E10") == [("NUMBER", "2E10")]
+
+
 def test_name_after_number_is_separate():
     assert kinds("2x") == [("NUMBER", "2"), ("NAME", "x")]
 
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_evaluator.py tests/test_tokenizer.py
: '>>>>> End Test Output'
git checkout 81c93b72e58c2e3aa70ef39ca76309b7bb91c7d2 -- tests/test_evaluator.py tests/test_tokenizer.py
