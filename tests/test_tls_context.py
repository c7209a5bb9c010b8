"""Every HTTP client of the package shares one SSL context per process (``replies.tls_context``):
each ``httpx`` client loaded the system's CA bundle again (``httpcore2.default_ssl_context``, 52 ms a
client, 269 clients in the fast tier, session 33's profile). The shared context still answers a
local server, and ``SSL_CERT_FILE`` set later gets its own."""
from __future__ import annotations

import httpcore2
import openai

from fair_forge_beam.components import replies
from fair_forge_beam.testing.openai_server import ScriptedOpenAIServer


def test_clients_share_one_ssl_context_made_once(monkeypatch):
    made = []
    original = httpcore2.default_ssl_context

    def counted(*a, **kw):
        made.append(1)
        return original(*a, **kw)

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    monkeypatch.setattr(replies, "_TLS", {}, raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with ScriptedOpenAIServer(lambda req: "hi") as srv:
        for _ in range(3):
            client = openai.OpenAI(base_url=srv.base_url, api_key="unused",
                                   http_client=replies.openai_http_client(openai, 10, 10**6, lambda request: None))
            assert client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}]).choices
            assert replies.http_client(10, {}).get(srv.base_url + "/models").status_code == 200
    assert len(made) == 1  # six clients, one CA bundle load
    monkeypatch.setenv("SSL_CERT_FILE", "/nonexistent/other-bundle.pem")
    key = ("/nonexistent/other-bundle.pem", None)
    monkeypatch.setattr(replies, "_TLS", {key: object()})
    assert replies.tls_context() is replies._TLS[key]  # another bundle: another context
