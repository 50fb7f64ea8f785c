"""Ring All-Reduce: the schedule (``schedule.py``), one reducer per file for the arithmetic of each
kind of codec, the table that chooses among them from the capabilities a codec declares
(``table.py``), and a plain ring to read beside the fast one (``plain.py``).
"""

from .reducer import Context, PieceReducer, Reducer, Weighting
from .schedule import RingExchange
from .table import REDUCERS, choose

__all__ = ["REDUCERS", "Context", "PieceReducer", "Reducer", "RingExchange", "Weighting", "choose"]
