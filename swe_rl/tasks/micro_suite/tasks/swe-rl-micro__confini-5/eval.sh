#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 42c75b52230bc5f07149ca0ab5445750b07bb9b2
git checkout 42c75b52230bc5f07149ca0ab5445750b07bb9b2 -- tests/test_config.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_config.py b/tests/test_config.py
index ed02ade..68d64c3 100644
--- a/tests/test_config.py
+++ b/tests/test_config.py
@@ -83,3 +83,10 @@ def test_set_and_add_section(cfg):
     assert cfg.getint("extra", "answer") == 42
     with pytest.raises(ConfigError):
         cfg.add_section("extra")
+
+
+def test_round_trip_keeps_multiline_values(cfg):
+    again = Config.from_string(cfg.to_string())
+    assert again.sections() == cfg.sections()
+    assert again.get("client", "mirrors") == cfg.get("client", "mirrors")
+    assert again.getint("client", "timeout") == 30
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_config.py
: '>>>>> End Test Output'
git checkout 42c75b52230bc5f07149ca0ab5445750b07bb9b2 -- tests/test_config.py
