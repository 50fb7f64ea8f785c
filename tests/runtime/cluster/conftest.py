"""One embedded LocalCluster shared by the runtime tests (starting one takes seconds)."""

import pytest

from adass.runtime.cluster import connect


@pytest.fixture(scope="module")
def cluster():
    handle = connect(n_workers=3)
    yield handle
    handle.close()
