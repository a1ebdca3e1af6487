"""Settings for the test suite: the console's own, in development mode (DEBUG allows the
development keys; tests that check the production refusal start their own processes)."""

import os
import tempfile

from tests import slots

os.environ.setdefault("DEBUG", "true")
# The tests' own Redis database (broker of the tasks they send, cache of the API's throttling and tracked
# collections), apart from a demo's (0), one per pytest worker; tests that start Celery processes give them their
# own.
slots.own_env("REDIS_URL", slots.redis_url)
# Audit bundles of the tests go to a folder of their own, one per pytest worker (workers the tests start inherit it).
slots.own_env("EXPORT_ROOT", lambda: tempfile.mkdtemp(prefix="pgconsole-test-exports-"))

from console.settings import *  # noqa: E402, F403

PASSWORD_HASHERS = ["tests.hashers.OneRoundPBKDF2PasswordHasher"]

# A collection run in the test process (no wait sampler alive) looks at pg_stat_activity ACTIVITY_SAMPLES times
# spread over 50 ms instead of a second: the same looks, sooner. The default's span is shown in force by
# tests/collectors/management/commands/test_sample_waits.py, which sets it back.
COLLECTOR = {**COLLECTOR, "ACTIVITY_SPAN_S": 0.05}  # noqa: F405

# The plans' automatic rounds unpaced in the test process (the plans worker takes at most 2 EXPLAINs a second by
# default, all its threads together): tests/collectors/plans/test_auto.py shows the pace in force; the workers the
# tests start keep the default.
PLANS = {**PLANS, "WORKER_EXPLAINS_PER_S": 0}  # noqa: F405
