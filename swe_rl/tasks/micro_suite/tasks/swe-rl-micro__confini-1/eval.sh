#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff a5b4d391c7244057b3552b15e332574615098d2d
git checkout a5b4d391c7244057b3552b15e332574615098d2d -- tests/test_parser.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_parser.py b/tests/test_parser.py
index bcee510..caf0472 100644
--- a/tests/test_parser.py
+++ b/tests/test_parser.py
@@ -21,6 +21,15 @@ def test_inline_comment_removed(sample):
     assert Config.from_string(sample).get("server", "url", raw=True) == "http://${host}:${port}/"
 
 
+def test_inline_comment_marker_inside_quotes_is_kept():
+    assert strip_inline_comment('"a ; b" ; comment') == '"a ; b"'
+    assert strip_inline_comment("'x # y'") == "'x # y'"
+
+
+def test_quoted_value_keeps_semicolon(sample):
+    assert Config.from_string(sample).get("server", "motd") == "Open 9-17 ; closed on Sundays"
+
+
 def test_marker_without_space_is_not_a_comment():
     assert strip_inline_comment("http://host/#anchor") == "http://host/#anchor"
 
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_parser.py
: '>>>>> End Test Output'
git checkout a5b4d391c7244057b3552b15e332574615098d2d -- tests/test_parser.py
