"""Ring All-Reduce: a schedule plus per-piece arithmetic. The schedules move payloads (``schedule.py``:
pipelined reduce-scatter and all-gather; ``allgather.py``: its sibling for payloads that cannot add),
one reducer per file does the arithmetic of each kind of codec, the table chooses both from the
capabilities a codec declares (``table.py``), ``exchange.py`` is the exchange that runs them, and
``plain.py`` is a plain ring to read beside the fast one.
"""

from .choice import REDUCERS, choose
from .exchange import RingExchange
from .reducer import Context, PieceReducer, Reducer, Weighting

__all__ = ["REDUCERS", "Context", "PieceReducer", "Reducer", "RingExchange", "Weighting", "choose"]
