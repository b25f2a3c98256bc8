"""Pure rules, with no I/O: input validation (`validation.py`), keyset page cursors
(`pagination.py`), when a save is absorbed (`dedup.py`) and what a save does (`saving.py`:
supersede, absorb or create), the context block (`context_block.py`) and the JSON form of a
memory (`codec.py`)."""
