from textkit import camel_to_snake, snake_to_camel, title_case


def test_camel_to_snake_simple():
    assert camel_to_snake("responseCode") == "response_code"
    assert camel_to_snake("ResponseCode") == "response_code"


def test_camel_to_snake_acronyms():
    assert camel_to_snake("HTTPResponseCode") == "http_response_code"
    assert camel_to_snake("parseXMLDocument") == "parse_xml_document"
    assert camel_to_snake("getURL") == "get_url"


def test_camel_to_snake_digits():
    assert camel_to_snake("base64Encode") == "base64_encode"


def test_camel_to_snake_keeps_separators_single():
    assert camel_to_snake("already_snake") == "already_snake"
    assert camel_to_snake("kebab-Case") == "kebab_case"


def test_snake_to_camel():
    assert snake_to_camel("http_response_code") == "httpResponseCode"
    assert snake_to_camel("http_response_code", upper_first=True) == "HttpResponseCode"


def test_snake_to_camel_keeps_leading_underscore():
    assert snake_to_camel("_private_name") == "_privateName"


def test_title_case():
    assert title_case("the lord of the rings") == "The Lord of the Rings"
    assert title_case("a tale of two cities") == "A Tale of Two Cities"


def test_title_case_keeps_acronyms():
    assert title_case("intro to HTTP and TLS") == "Intro to HTTP and TLS"
