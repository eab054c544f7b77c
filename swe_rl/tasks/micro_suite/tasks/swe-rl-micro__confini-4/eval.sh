#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 05afdcd9b361c36a8555ae14ec8d25f09870c3a9
git checkout 05afdcd9b361c36a8555ae14ec8d25f09870c3a9 -- tests/test_config.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_config.py b/tests/test_config.py
index 96c3e5c..68d64c3 100644
--- a/tests/test_config.py
+++ b/tests/test_config.py
@@ -67,6 +67,10 @@ def test_getbool_words():
         cfg.getbool("a", "w")
 
 
+def test_getlist_splits_continuation_lines(cfg):
+    assert cfg.getlist("client", "mirrors") == ["eu.example.org", "us.example.org", "asia.example.org"]
+
+
 def test_has_option_is_case_insensitive(cfg):
     assert cfg.has_option("server", "host")
     assert cfg.has_option("server", "HOST")
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_config.py
: '>>>>> End Test Output'
git checkout 05afdcd9b361c36a8555ae14ec8d25f09870c3a9 -- tests/test_config.py
