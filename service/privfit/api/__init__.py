"""The HTTP API: the FastAPI app factory (:mod:`.app`), its routers, problem+json errors, auth and limits."""
