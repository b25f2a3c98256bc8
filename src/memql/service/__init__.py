"""The memory service: `MemoryService` (`facade.py`), the one API of the transports, and the
save algorithm behind it (`saving.py`)."""

from memql.service.facade import DEFAULT_WEIGHTS, MemoryService

__all__ = ["DEFAULT_WEIGHTS", "MemoryService"]
