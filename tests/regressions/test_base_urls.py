"""A base URL that is no http(s) URL (a typo, a missing scheme, a bad port, an unclosed IPv6 bracket), given as
``base_url=``, ``--base-url`` or the provider's ``*_BASE_URL`` variable, is a UsageError when the transport is
made, for every dialect, sync and async: never a request to a mangled address, nor a loop that answers the user
with its fallback text as if the provider had failed (failure mode 57)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import toolwire
from toolwire.codecs import dialect_for, dialects
from toolwire.harness import AsyncHTTPTransport, AsyncToolLoop, HTTPTransport, ToolLoop

BAD = ["not a url", "localhost:8080", "ftp://example.com", "http://", "http:///v1", "http://[::1",
       "http://example.com:99999", "http://example.com:port", "https://exa mple.com", "http://example.com/\n",
       "", "http://example.com:0", "http://[fe80::1%25eth0]:80", "http://example.com/v1?api-version=1",
       "http://example.com/#frag", "http://example.com?", "http://./", "http://a\ud800b.com",
       "http://example.com/" + "a" * (1 << 20)]
GOOD = ["http://127.0.0.1:9", "https://example.com/", "http://[::1]:8080/prefix", "HTTPS://Example.COM/v"]
ROOT = Path(__file__).resolve().parents[2]
DIALECTS = sorted(d.id for d in dialects() if d.http is not None)


def _registry() -> toolwire.Registry:
    def ping() -> str:
        """Answer pong."""
        return "pong"

    return toolwire.Registry([toolwire.Tool.from_function(ping, effect="read")])


@pytest.fixture(autouse=True)
def _aws(monkeypatch):
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.mark.parametrize("provider", DIALECTS)
@pytest.mark.parametrize("url", BAD)
def test_a_base_url_that_is_no_http_url_is_a_usage_error_for_every_transport(provider, url):
    """HTTPTransport, AsyncHTTPTransport, ToolLoop and AsyncToolLoop refuse it with a UsageError naming base_url."""
    for make in (lambda: HTTPTransport(provider, model="m", base_url=url, api_key="k"),
                 lambda: AsyncHTTPTransport(provider, model="m", base_url=url, api_key="k"),
                 lambda: ToolLoop(provider, model="m", registry=_registry(), base_url=url, api_key="k"),
                 lambda: AsyncToolLoop(provider, model="m", registry=_registry(), base_url=url, api_key="k")):
        with pytest.raises(toolwire.UsageError, match="base_url"):
            make()


@pytest.mark.parametrize("provider", DIALECTS)
@pytest.mark.parametrize("url", ["not a url", "http://[::1"])
def test_a_base_url_variable_that_is_no_http_url_is_a_usage_error_naming_the_variable(provider, url, monkeypatch):
    """The same URL read from the provider's environment variable is refused naming that variable."""
    var = dialect_for(provider).http.base_url_env
    monkeypatch.setenv(var, url)
    with pytest.raises(toolwire.UsageError, match=var):
        HTTPTransport(provider, model="m", api_key="k")


@pytest.mark.parametrize("provider", DIALECTS)
@pytest.mark.parametrize("url", GOOD)
def test_an_http_base_url_is_kept(provider, url):
    """An http(s) URL with a host, a port, an IPv6 literal or a path prefix is accepted as before."""
    HTTPTransport(provider, model="m", base_url=url, api_key="k").close()


def test_the_usage_error_does_not_echo_credentials_in_the_url():
    """A refused URL carrying user:password is not repeated in the message."""
    with pytest.raises(toolwire.UsageError) as err:
        HTTPTransport("openai-chat", model="m", base_url="ftp://user:s3cr3t-pass@example.com", api_key="k")
    assert "s3cr3t-pass" not in str(err.value)


def test_async_loop_refuses_it_before_any_request():
    """An AsyncToolLoop made inside a running loop refuses the URL at construction, not at its first run."""
    async def main():
        with pytest.raises(toolwire.UsageError, match="base_url"):
            AsyncToolLoop("anthropic", model="m", registry=_registry(), base_url="not a url", api_key="k")

    asyncio.run(main())


def test_cli_chat_with_a_bad_base_url_exits_2_with_one_line():
    """toolwire chat --base-url 'not a url' exits 2 with a one-line error, before any request."""
    proc = subprocess.run([sys.executable, "-m", "toolwire", "chat", "--provider", "openai-chat", "--model", "m",
                           "--tools", "tests.chat_tools", "--base-url", "not a url", "hello"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env={"OPENAI_API_KEY": "k", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "base_url" in proc.stderr or "base-url" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", [0, False, b"", b"http://example.com", 8080, ["http://example.com"]])
def test_a_base_url_that_is_no_string_is_a_usage_error_not_the_default(value):
    """A falsy or non-string base_url is refused, never read as "use the provider's own URL" (with the key)."""
    with pytest.raises(toolwire.UsageError, match="base_url"):
        HTTPTransport("openai-chat", model="m", base_url=value, api_key="k")


@pytest.mark.parametrize("url", ["http://user:s3cr3t/pass@example.com", "http://user:s3cr3t#pass@example.com",
                                 "http://user:s3cr3t?pass@example.com", "http://user:s3cr3t\uff03x@example.com",
                                 "http://[s3cr3t-host]/", "s3cr3t-key:whatever", "http://user:s3cr3t@:0/",
                                 "http://u:s3cr3t@example.com/?token=s3cr3t"])
def test_no_part_of_a_refused_url_is_repeated(url):
    """Whatever makes the URL unreadable (a password with '/', '#' or '?', a bracketed name, a key pasted in its
    place, a query token), the UsageError repeats none of it."""
    with pytest.raises(toolwire.UsageError) as err:
        HTTPTransport("anthropic", model="m", base_url=url, api_key="k")
    assert "s3cr3t" not in str(err.value)


def test_a_base_url_variable_is_read_without_the_white_space_around_it(monkeypatch):
    """A base URL variable with a trailing newline (read from a file) is used as the URL it holds, for every
    dialect alike; an empty or blank one means unset."""
    for provider in DIALECTS:
        var = dialect_for(provider).http.base_url_env
        monkeypatch.setenv(var, " http://127.0.0.1:9/prefix\n")
        assert HTTPTransport(provider, model="m", api_key="k").url.startswith("http://127.0.0.1:9/prefix/")
        monkeypatch.setenv(var, "  ")
        HTTPTransport(provider, model="m", api_key="k").close()
        monkeypatch.delenv(var)
