import pytest

SAMPLE = """\
# sample configuration
[DEFAULT]
timeout = 30

[server]
Host = example.org
port = 8080
url = http://${host}:${port}/   ; built from the same section
debug = off
motd = "Open 9-17 ; closed on Sundays"  # quoted, so the ';' is kept
price = $$5

[client]
server = ${server:url}
retries: 3
ratio = 0.75
mirrors =
    eu.example.org, us.example.org
    asia.example.org
"""


@pytest.fixture
def sample():
    return SAMPLE
