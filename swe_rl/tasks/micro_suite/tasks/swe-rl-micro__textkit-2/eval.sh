#!/bin/bash
set -uxo pipefail
cd /testbed
git status
git -c core.fileMode=false diff 483e83230854a03893c6b4b1bebc602f2236efd2
git checkout 483e83230854a03893c6b4b1bebc602f2236efd2 -- tests/test_case.py
git apply -v - <<'EOF_114329324912'
diff --git a/tests/test_case.py b/tests/test_case.py
index 4f557c0..2f6eedd 100644
--- a/tests/test_case.py
+++ b/tests/test_case.py
@@ -6,6 +6,12 @@ def test_camel_to_snake_simple():
     assert camel_to_snake("ResponseCode") == "response_code"
 
 
+def test_camel_to_snake_acronyms():
+    assert camel_to_snake("HTTPResponseCode") == "http_response_code"
+    assert camel_to_snake("parseXMLDocument") == "parse_xml_document"
+    assert camel_to_snake("getURL") == "get_url"
+
+
 def test_camel_to_snake_digits():
     assert camel_to_snake("base64Encode") == "base64_encode"
 
EOF_114329324912
: '>>>>> Start Test Output'
python3 -m pytest -rA -p no:cacheprovider tests/test_case.py
: '>>>>> End Test Output'
git checkout 483e83230854a03893c6b4b1bebc602f2236efd2 -- tests/test_case.py
