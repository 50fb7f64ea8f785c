"""Sample-selection policies: ``full``, ``random``, ``infobatch``, ``selective_backprop``, ``adass``."""

from . import adass, full, infobatch, random_subset, selective_backprop  # noqa: F401  (registers)
from .adass import AdassSampler, draw_chances, drop_within_budget, global_dropper, global_pooler
from .agreement import Agreement
from .base import SAMPLERS, Sampler, SamplerBase, Selection, shuffled
from .full import FullSampler
from .infobatch import InfoBatchSampler
from .random_subset import RandomSampler
from .selective_backprop import SelectiveBackpropSampler

__all__ = [
    "SAMPLERS",
    "AdassSampler",
    "Agreement",
    "FullSampler",
    "InfoBatchSampler",
    "RandomSampler",
    "Sampler",
    "SamplerBase",
    "Selection",
    "SelectiveBackpropSampler",
    "build_sampler",
    "draw_chances",
    "drop_within_budget",
    "global_dropper",
    "global_pooler",
    "shuffled",
]


def build_sampler(spec: str, **context: object) -> Sampler:
    """Build a sampler from its spec; ``context`` carries ``n``, ``seed``, ``epochs`` and, for
    ``adass``, ``feature_sq_norms``, ``linear`` and ``last_lr`` (the last epoch's learning rate as a
    share of the first's)."""
    return SAMPLERS.build(spec, **context)
