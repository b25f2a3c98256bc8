"""The memory service: `MemoryService` (`memories.py`), the one API of the transports, the
save algorithm behind it (`saving.py`) and a project's webhook endpoints (`webhooks.py`)."""

from memql.service.memories import DEFAULT_WEIGHTS, MemoryService

__all__ = ["DEFAULT_WEIGHTS", "MemoryService"]
