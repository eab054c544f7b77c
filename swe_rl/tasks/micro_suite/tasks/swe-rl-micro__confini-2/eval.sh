#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 07a6c73c590e1140c68057b7f633258e66414e50
git checkout 07a6c73c590e1140c68057b7f633258e66414e50 -- tests/test_config.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_config.py b/tests/test_config.py
index de9ea8c..68d64c3 100644
--- a/tests/test_config.py
+++ b/tests/test_config.py
@@ -42,6 +42,12 @@ def test_bad_reference(cfg):
         cfg.get("client", "broken")
 
 
+def test_circular_reference_is_reported():
+    cfg = Config.from_string("[a]\nx = ${y}\ny = ${x}\n")
+    with pytest.raises(InterpolationError, match="circular"):
+        cfg.get("a", "x")
+
+
 def test_typed_getters(cfg):
     assert cfg.getint("server", "port") == 8080
     assert cfg.getfloat("client", "ratio") == 0.75
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_config.py
: '>>>>> End Test Output'
git checkout 07a6c73c590e1140c68057b7f633258e66414e50 -- tests/test_config.py
