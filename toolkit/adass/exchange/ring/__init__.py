"""Ring All-Reduce: the schedule (``schedule.py``) and the reducers it moves pieces for."""

from .schedule import RingExchange

__all__ = ["RingExchange"]
