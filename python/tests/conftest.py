import os
import sys
import zlib

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # reference.py, checks.py
# Without an installed package, test the source tree (python/flashattn).
try:
    import flashattn  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(HERE))


@pytest.fixture(scope="session", autouse=True)
def _library():
    """Fail early, with the loader's message, when libflashattn is missing."""
    import flashattn

    try:
        path = flashattn.library_path()
    except flashattn.FlashAttnLibraryError as e:
        pytest.exit(f"libflashattn not found: {e}", returncode=3)
    print(f"\nlibflashattn {flashattn.library_version()} from {path}; "
          f"cuda available: {flashattn.cuda_available()}")


@pytest.fixture
def rng(request):
    # Fresh inputs per test, reproducible from the test's name.
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
