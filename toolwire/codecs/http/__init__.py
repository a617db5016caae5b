"""The ``HTTP`` part of each dialect record (``toolwire.codecs.requests.HTTP``), one module per dialect:
endpoints, auth headers, request bodies, request options and the names the tracing conventions give it."""
