#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 1fa5cdc59615366049232faa1b2382a2f4ae1c58
git checkout 1fa5cdc59615366049232faa1b2382a2f4ae1c58 -- tests/test_config.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_config.py b/tests/test_config.py
index 3e077f0..68d64c3 100644
--- a/tests/test_config.py
+++ b/tests/test_config.py
@@ -71,6 +71,12 @@ def test_getlist_splits_continuation_lines(cfg):
     assert cfg.getlist("client", "mirrors") == ["eu.example.org", "us.example.org", "asia.example.org"]
 
 
+def test_has_option_is_case_insensitive(cfg):
+    assert cfg.has_option("server", "host")
+    assert cfg.has_option("server", "HOST")
+    assert not cfg.has_option("server", "nope")
+
+
 def test_set_and_add_section(cfg):
     cfg.add_section("extra")
     cfg.set("extra", "Answer", 42)
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_config.py
: '>>>>> End Test Output'
git checkout 1fa5cdc59615366049232faa1b2382a2f4ae1c58 -- tests/test_config.py
