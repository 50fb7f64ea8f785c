"""Fixtures of synthetic records for the view tests (see synthetic_records for their shapes)."""

from __future__ import annotations

import pandas as pd
import pytest
from synthetic_records import eval_records, selection_frame, step_rows

from adass.metrics import StepRecord, columns


@pytest.fixture
def selection() -> pd.DataFrame:
    return selection_frame()


@pytest.fixture
def steps() -> pd.DataFrame:
    return pd.DataFrame(step_rows())[columns(StepRecord)]


@pytest.fixture
def evals() -> pd.DataFrame:
    return pd.DataFrame([vars(r) for r in eval_records()])
