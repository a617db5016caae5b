"""toolwire.sim: a simulated LLM provider for demos and end-to-end tests of the harness loop.

``SimProvider`` is a real HTTP server on loopback (standard library only) that speaks the five dialects at the
real APIs' paths: OpenAI Chat ``POST /v1/chat/completions``, OpenAI Responses ``POST /v1/responses``, Anthropic
``POST /v1/messages``, Gemini ``POST /v1beta/models/{model}:generateContent`` / ``:streamGenerateContent``
(``?alt=sse`` or a progressively streamed JSON array) and Gemini Interactions ``POST /v1beta/interactions``.
Its model is scripted (``SCENARIOS``, in ``toolwire.sim.scenarios``): the conversation's first user text picks a
scenario and a language, and the script reacts to the tool results it finds in the request.

Streams look like the real ones: argument JSON cut inside strings and numbers, events grouped and split across
socket writes, the dialects' own ids, and the opaque state that must be replayed (an Anthropic ``thinking``
block with its ``signature``, a Gemini ``thoughtSignature`` on the first functionCall part, a Responses
``reasoning`` item with ``encrypted_content``). Requests are checked as the providers check them (results under
the right ids, in the right place, replayed state intact) and refused with the provider's own error body.
``Fault`` plans HTTP errors, cut or reset connections, in-stream errors, slow first bytes, token-limit and other
unclean endings, arbitrary bodies, headers and arguments, and bytes that are no HTTP response at all::

    from toolwire.sim import SimProvider, Fault
    sim = SimProvider()
    with sim.serve() as base_url:
        sim.plan([Fault.status(429, retry_after=0.05), Fault.cut(at=0.5)])
        ...                      # POST to base_url + "/v1/messages" etc.
        sim.requests             # RecordedRequest(dialect, method, path, body, status, fault, ...)
"""

from __future__ import annotations

from ._core import Fault, RecordedRequest
from ._server import SimProvider
from .scenarios import LANGUAGES, SCENARIOS, Scenario, find_scenario

__all__ = ["SimProvider", "Fault", "RecordedRequest", "SCENARIOS", "Scenario", "LANGUAGES", "find_scenario"]
