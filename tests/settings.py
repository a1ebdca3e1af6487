"""Settings for the test suite: the console's own, in development mode (DEBUG allows the
development keys; tests that check the production refusal start their own processes)."""

import os

os.environ.setdefault("DEBUG", "true")
# The tests' own Redis database (broker of the tasks they send, cache of the API's throttling and tracked
# collections), apart from a demo's (0); tests that start Celery processes give them their own.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")

from console.settings import *  # noqa: E402, F403
