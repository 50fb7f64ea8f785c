"""The time model: what a link costs (``model.py``: ``1gbit,50us`` specs and a clock that paces a
real link), modelled step time from traffic records (``timing.py``), and where an exchange call
spends its own time (``clock.py``).
"""

from .clock import CodecClock
from .model import Link, LinkClock, parse_link
from .timing import stage_seconds, traffic_frame

__all__ = ["CodecClock", "Link", "LinkClock", "parse_link", "stage_seconds", "traffic_frame"]
