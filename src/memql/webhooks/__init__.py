"""Webhooks: a project's memory events, POSTed to its HTTP endpoints from the event log.

`registry.py` registers, lists and removes endpoints (CLI and GraphQL); `targets.py` refuses
private, loopback and link-local destinations; `signing.py` signs each body; `delivery.py` is the
deliverer, one across all instances, started from the app's lifespan.
"""
