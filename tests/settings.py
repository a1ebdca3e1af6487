"""Settings for the test suite: the console's own, in development mode (DEBUG allows the
development keys; tests that check the production refusal start their own processes)."""

import os
import tempfile

os.environ.setdefault("DEBUG", "true")
# The tests' own Redis database (broker of the tasks they send, cache of the API's throttling and tracked
# collections), apart from a demo's (0); tests that start Celery processes give them their own.
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")
# Audit bundles of the tests go to a folder of their own (workers the tests start inherit it).
os.environ.setdefault("EXPORT_ROOT", tempfile.mkdtemp(prefix="pgconsole-test-exports-"))

from console.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["tests.hashers.OneRoundPBKDF2PasswordHasher"]
