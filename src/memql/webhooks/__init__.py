"""The rules of webhooks, with no I/O of memql's own: `targets.py` refuses private, loopback and
link-local destinations; `signing.py` signs each body; `shares.py` shares the deliverer's
connections fairly between projects.

Registering endpoints is `service/webhooks.py`; a body is `graphql/webhook_payload.py`; the
deliverer, one across all instances, started from the app's lifespan, is `webhook_delivery.py`.
"""
