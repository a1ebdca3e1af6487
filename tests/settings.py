"""Settings for the test suite: the console's own, in development mode (DEBUG allows the
development keys; tests that check the production refusal start their own processes)."""

import os

os.environ.setdefault("DEBUG", "true")

from console.settings import *  # noqa: E402, F403
