"""The HTTP edge: every refusal as JSON with its status (`errors.py`), the body limit and bounded
JSON decoding (`request_body.py`), cross-origin checks (`origins.py`), `/metrics` (`metrics.py`)
and what memql serves to browsers (`web/`)."""
