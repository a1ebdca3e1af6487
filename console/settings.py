"""Settings, all read from the environment. Production by default: DEBUG=true (set by ``make test``,
``make demo``) turns on debugging and the development keys; without it real keys are required.

One module over 400 lines: Django reads one settings module; each group (collector, plans, alerts, reports, exports,
security) is declared where its environment variable is read, with its reason, and docs/configuration.md lists them."""

from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue
from whitenoise.compress import Compressor

from collectors.config import from_environment as readings_settings
from console import keys

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
SECRET_KEY = env("SECRET_KEY", default=keys.DEV_SECRET_KEY if DEBUG else "")
# Fernet key (urlsafe base64, 32 bytes) that encrypts monitoring passwords at rest.
CREDENTIALS_KEY = env("CREDENTIALS_KEY", default=keys.DEV_CREDENTIALS_KEY if DEBUG else "")
# Refuse to start rather than sign sessions and encrypt passwords with keys published in this repository.
if _problems := keys.key_problems(secret_key=SECRET_KEY, credentials_key=CREDENTIALS_KEY, debug=DEBUG):
    raise ImproperlyConfigured(
        "refusing to start:\n  - "
        + "\n  - ".join(_problems)
        + f"\n(both keys at once, as an env file: {keys.GENERATE_ENV_FILE}; for development and tests: DEBUG=true)"
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:54320/pgconsole")}
DATABASES["default"].setdefault("OPTIONS", {})
# A history store behind a dead network path fails a connection in seconds instead of holding a web thread or
# a worker until TCP gives up (libpq waits for ever by default); /healthz then answers 503 within its timeout.
DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT_S", default=5))
# What a web request may run on the history store, per statement (console.middleware.ReadTimeoutMiddleware); the
# workers have their own, below.
WEB_STATEMENT_TIMEOUT_MS = env.int("WEB_STATEMENT_TIMEOUT_MS", default=30_000)
# What a Celery worker, beat or the wait sampler may run on the history store, per statement (console.celery,
# history.sessions): about a hundred times the longest measured (a rollup's look over 1,500 servers' 4 days, 3 s;
# a 60-day prune of a 5,000-statement server, 0.8 s), so it stops a stuck one, never a slow one. Exports set their
# own (EXPORT_TIME_LIMIT_S). 0: none.
WORKER_STATEMENT_TIMEOUT_MS = env.int("WORKER_STATEMENT_TIMEOUT_MS", default=300_000)
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=300)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", default="test_pgconsole")}

REDIS_URL = env("REDIS_URL", default="redis://127.0.0.1:6379/0")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "console.static_files.StaticFiles",
    "axes",
    # The optional second factor (console/two_factor.py): TOTP devices, throttled.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "template_partials",
    "inventory",
    "accounts",
    "console",
    "history",
    "collectors",
    "advisor",
    "reports",
    "exports",
    "alerts",
]
# The development environment's commands (manage.py demo): in development only.
if DEBUG:
    INSTALLED_APPS.append("devenv")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Serves STATIC_ROOT (filled by collectstatic) from the app server itself, compressed and cached.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified(): whether this session gave its authenticator code (console/two_factor.py).
    "django_otp.middleware.OTPMiddleware",
    # Every page needs a login but the login page itself (@login_not_required).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "console.login_guard.IdleSessionMiddleware",
    # A user with a second factor reaches nothing but the code's page until the session gives a code.
    "console.two_factor.SecondFactorMiddleware",
    "console.middleware.UserTimezoneMiddleware",
    # The history store's statements of a web request stop after WEB_STATEMENT_TIMEOUT_MS (503 with what to do).
    "console.middleware.ReadTimeoutMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it turns a login refused for too many failures into the lockout answer.
    "axes.middleware.AxesMiddleware",
]

# --- REST API (/api/v1/) -------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "console.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated", "console.api.auth.ReadOnlyToken"],
    "DEFAULT_THROTTLE_CLASSES": ["console.api.throttling.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": env("API_THROTTLE_RATE", default="600/min")},
    "DEFAULT_RENDERER_CLASSES": [
        "console.api.common.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "console.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "pgconsole API",
    "DESCRIPTION": "Query analysis and advice for PostgreSQL fleets: servers, snapshots, top statements, series, "
    "recommendations. Authenticate with `Authorization: Bearer <token>` (create one in the console or with "
    "`manage.py tokens create`).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],  # nothing is readable anonymously
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["console.api.schema.add_error_responses"],
    "ENUM_NAME_OVERRIDES": {
        "ServerStatusEnum": ["ok", "failing", "stale", "disabled", "never collected"],
        "RecommendationStatusEnum": ["open", "acknowledged", "resolved"],
        "SeverityEnum": ["info", "warning", "critical"],
        "AlertChannelKindEnum": ["email", "slack", "pagerduty", "webhook"],
        "AlertRuleKindEnum": ["server_down", "advisor", "dealloc", "regression"],
        "AlertDeliveryStatusEnum": ["pending", "sending", "sent", "failed"],
        "AlertDeliveryEventEnum": ["test", "open", "resolve", "remind", "escalate"],
    },
}
# Pages that make the console work for a user (console/throttling.py): requests per user, as DRF writes rates. An
# EXPLAIN asked for (the Plan tab's button, the API) counts against both of its rates.
PAGE_RATES = {
    "check": "20/min",
    "test_mail": "5/hour",
    "test_alert": "20/hour",
    "preview": "60/min",
    "explain": env("EXPLAIN_NOW_RATE", default="10/min"),
    "explain_hourly": env("EXPLAIN_NOW_HOURLY_RATE", default="60/hour"),
}
# Throttling counters are shared by every web process: in Redis.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "fleet"
LOGOUT_REDIRECT_URL = "login"
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
# Behind HTTPS (HTTPS=true; a proxy that terminates TLS sets X-Forwarded-Proto): cookies only over
# HTTPS, HTTP redirected, and browsers told to stay on HTTPS.
HTTPS = env.bool("HTTPS", default=False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
# Plain HTTP outside DEBUG is an error of `check --deploy` (console.E001) and a warning in the web server's log,
# unless acknowledged here for a private network (then console.W001).
ALLOW_PLAIN_HTTP = env.bool("ALLOW_PLAIN_HTTP", default=False)
# Where the console may connect as a monitored server (inventory/network_policy.py): link-local and metadata
# addresses, its own history store and Redis are refused always; private ranges (a team's LAN) unless turned
# off here, as a hosted console must; loopback only when asked for (on by default in development).
MONITOR_ALLOW_PRIVATE = env.bool("MONITOR_ALLOW_PRIVATE", default=True)
MONITOR_ALLOW_LOOPBACK = env.bool("MONITOR_ALLOW_LOOPBACK", default=DEBUG)
# Where the CA certificates given per server are written for libpq, which reads them only from files
# (inventory/tls.py): a folder of the console's own account.
TLS_CA_DIR = env.path("TLS_CA_DIR", default=Path.home() / ".cache" / "pgconsole" / "ca")
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    # The container healthcheck asks over plain HTTP from inside (console/views/health.py).
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=3600)
    # Choices about the operator's whole domain, not this console's: off unless asked for (check --deploy's
    # security.W005 and W021 until then; docs/operations.md, TLS in front).
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_HTTPONLY = True
# A session ends after this long without a request (console.login_guard.IdleSessionMiddleware renews it while
# the user works), not two weeks after logging in.
SESSION_COOKIE_AGE = env.int("SESSION_IDLE_MINUTES", default=8 * 60) * 60
# Reverse proxies in front of the web server that add the client's address to X-Forwarded-For (0: none, the
# client is REMOTE_ADDR). Login throttling counts failures per address: behind a proxy without this, every
# client would share the proxy's address.
TRUSTED_PROXIES = env.int("TRUSTED_PROXIES", default=0)

# --- Login throttling (django-axes) -----------------------------------------
# Chosen over a counter of our own: a maintained Jazzband library that hooks into authenticate() itself, so the
# console's login page and the admin's are covered alike, with its records and unlock command in the admin.
# Failures are counted per client address and per user name, each on its own: a guesser spreading over many
# names from one address, or over many addresses for one name, is stopped either way.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("LOGIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
# A success clears nothing: reset by address, one valid account would wipe its address's failures against
# other users' names between guesses. Failures age out after the cool-off instead.
AXES_RESET_ON_SUCCESS = False
# Attempts during a lockout do not extend it: a lock on a user name ends when it said it would.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "console.login_guard.lockout_response"
AXES_CLIENT_IP_CALLABLE = "console.login_guard.client_ip"
AXES_VERBOSE = False
# The optional second factor: the name an authenticator app shows for the console's codes.
OTP_TOTP_ISSUER = env("OTP_ISSUER", default="pgconsole")

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context.console",
            ],
        },
    },
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
# Outside DEBUG, hashed names (cached forever by browsers) from the manifest that collectstatic writes;
# under DEBUG (development, tests) files are served as they are, with no collectstatic needed.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage",
    },
}
# Under DEBUG, WhiteNoise finds files where they are (no collectstatic); outside, it indexes STATIC_ROOT at start.
WHITENOISE_AUTOREFRESH = WHITENOISE_USE_FINDERS = DEBUG
# Source maps are read by a browser's developer tools only: served as they are, not compressed at build time (they
# were half of the bytes collectstatic compressed, in gzip and brotli at its highest level).
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="WARNING")},
    # A worker runs at INFO (celery --loglevel info): WeasyPrint would log every step of every audit PDF.
    "loggers": {name: {"level": "WARNING"} for name in ("weasyprint", "fontTools")},
}

# --- Celery -----------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# No results are kept, so nothing to clean: without this, beat adds a daily celery.backend_cleanup of its own to
# the schedule (console/schedule.py is the whole schedule).
CELERY_RESULT_EXPIRES = None
CELERY_TASK_ACKS_LATE = True
# Celery's Django fixup closes every database connection after every task unless this is set, whatever
# CONN_MAX_AGE says: each collection then opened a new session on the history store (TCP, SCRAM, a new
# backend with cold caches), a large share of the worker's and the history store's CPU per snapshot. Set, it
# closes them only every 2 × this many tasks; console/celery.py drops the broken and the aged ones around each
# task instead, as Django does around a request.
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# One queue per kind of work, so that a slow audit export, a weekly report run or the advisor over a large
# fleet never delays a collection: docker-compose.yml runs a worker on `collection` apart from the ones on the
# others (docs/operations.md, "Scaling out"). "Test connection" has a queue of its own that the collection
# worker also serves (it waits on a monitored server too), so a backlog of collections never keeps a DBA
# waiting for a check. Alert deliveries wait on receivers anywhere (up to ALERTS_TIMEOUT_S each): their own
# queue and their own threaded worker, so that no receiver delays a collection; the alert rules' evaluations a
# queue and a worker of their own again (`alert-rules`), so that no receiver delays an evaluation either. Plans
# (EXPLAINs of top statements on monitored servers, within each server's budget) too: a worker of their own, never
# the collections'. A worker started without --queues consumes all.
CELERY_TASK_QUEUES = tuple(
    Queue(name)
    for name in (
        "collection",
        "checks",
        "plans",
        "alerts",
        "alert-rules",
        "advisor",
        "reports",
        "exports",
        "maintenance",
    )
)
CELERY_TASK_DEFAULT_QUEUE = "maintenance"  # rollups, partitions
CELERY_TASK_ROUTES = {
    "collectors.tasks.collect_server": {"queue": "collection"},
    "collectors.tasks.dispatch_due_collections": {"queue": "collection"},
    "collectors.tasks.check_connection": {"queue": "checks"},
    "collectors.tasks.plan_*": {"queue": "plans"},
    "alerts.tasks.evaluate_alerts": {"queue": "alert-rules"},  # names before patterns: these two win
    "alerts.tasks.evaluate_alert_group": {"queue": "alert-rules"},
    "alerts.tasks.*": {"queue": "alerts"},
    "advisor.tasks.*": {"queue": "advisor"},
    "reports.tasks.*": {"queue": "reports"},
    "exports.audit_export_build": {"queue": "exports"},
    "exports.tidy_audit_exports": {"queue": "exports"},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that lost Redis keeps trying (every 2, 4, 6... up to 30 s) however long it is away, instead of
# exiting after 100 attempts (about 50 minutes): collections resume by themselves once Redis is back.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# How often beat ticks the dispatcher that enqueues due collections (seconds).
DISPATCH_TICK_S = env.float("DISPATCH_TICK_S", default=5.0)

# How often beat has the advisor evaluate every enabled server (seconds).
ADVISOR_INTERVAL_S = env.int("ADVISOR_INTERVAL_S", default=300)
# One server's evaluation, at most (seconds): past it the tasks worker stops it (Celery's soft time limit; its
# query on the history store cancelled, the reason on the server's evaluation) and kills it 30 s later if it
# has not stopped. Its texts are untrusted: no text may hold a worker for longer.
ADVISOR_TIME_LIMIT_S = env.int("ADVISOR_TIME_LIMIT_S", default=120)
# The advisor's shortest window, "the last hour" (seconds): a sustained rate must hold over it, the day and the
# week. Tests shorten it to see a condition end within a minute.
ADVISOR_SHORT_WINDOW_S = env.int("ADVISOR_SHORT_WINDOW_S", default=3600)

# --- Alerts (alerts/): where and how the console sends them ----------------------------------------------------
# Outbound addresses follow the monitored servers' network policy (MONITOR_ALLOW_PRIVATE, MONITOR_ALLOW_LOOPBACK).
ALERTS_TIMEOUT_S = env.float("ALERTS_TIMEOUT_S", default=10.0)  # a receiver's answer, connecting included
ALERTS_MAX_ATTEMPTS = env.int("ALERTS_MAX_ATTEMPTS", default=6)
ALERTS_RETRY_BASE_S = env.float("ALERTS_RETRY_BASE_S", default=30.0)  # doubled per attempt: 30 s, 1, 2, 4, 8 min
ALERTS_CLAIM_STALE_S = env.int("ALERTS_CLAIM_STALE_S", default=120)  # a claim older is a worker that died
ALERTS_TIDY_S = env.int("ALERTS_TIDY_S", default=60)  # how often beat looks for deliveries whose message was lost
ALERTS_EVALUATE_S = env.int("ALERTS_EVALUATE_S", default=60)  # how often beat evaluates the alert rules
ALERTS_SERVERS_PER_TASK = env.int("ALERTS_SERVERS_PER_TASK", default=50)  # an evaluation's group (one task each)
# An organization's share of the alert workers (alerts.shares): at most this many of its deliveries are sent at
# once, across every alerts worker, so that its slow receivers (each held up to ALERTS_TIMEOUT_S) leave the other
# threads to the other organizations; its further deliveries are deferred a few seconds (never lost). 2 of
# compose's 8 threads: some ten deliveries a second to receivers answering in 0.2 s. 0: no limit.
ALERTS_ORG_MAX_SENDING = env.int("ALERTS_ORG_MAX_SENDING", default=2)
ALERTS_ORG_MAX_CHANNELS = env.int("ALERTS_ORG_MAX_CHANNELS", default=20)  # channels of one organization (0: no limit)
ALERTS_ALLOW_PLAIN_HTTP = env.bool("ALERTS_ALLOW_PLAIN_HTTP", default=DEBUG)  # webhooks over http://
ALERTS_PAGERDUTY_URL = env("ALERTS_PAGERDUTY_URL", default="https://events.pagerduty.com/v2/enqueue")
ALERTS_SLACK_URL_PREFIXES = env.list(
    "ALERTS_SLACK_URL_PREFIXES", default=["https://hooks.slack.com/services/", "https://hooks.slack-gov.com/services/"]
)

# --- Mail (the weekly reports) ------------------------------------------------------------------
# Standard Django email settings from the environment: EMAIL_URL (smtp://user:pass@host:25,
# smtp+tls://... for STARTTLS, smtp+ssl://... for TLS from the start, consolemail:// to print them) or
# the separate EMAIL_* variables; EMAIL_URL wins where both are set.
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_USE_SSL = env.bool("EMAIL_USE_SSL", default=False)
if env("EMAIL_URL", default=""):
    _mail = env.email_url("EMAIL_URL")
    EMAIL_BACKEND = _mail["EMAIL_BACKEND"]
    EMAIL_HOST = _mail["EMAIL_HOST"] or EMAIL_HOST
    EMAIL_PORT = _mail["EMAIL_PORT"] or EMAIL_PORT
    EMAIL_HOST_USER = _mail["EMAIL_HOST_USER"] or ""
    EMAIL_HOST_PASSWORD = _mail["EMAIL_HOST_PASSWORD"] or ""
    EMAIL_USE_TLS = _mail.get("EMAIL_USE_TLS", False)
    EMAIL_USE_SSL = _mail.get("EMAIL_USE_SSL", False)
# A mail server that stops answering must not hold a worker for ever (seconds).
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=30)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="pgconsole <reports@localhost>")
# Where the console is reached from a mail: its links (absolute) and the unsubscribe URLs.
CONSOLE_URL = env("CONSOLE_URL", default="http://127.0.0.1:8000").rstrip("/")

# --- Collection -------------------------------------------------------------
COLLECTOR = {
    "CONNECT_TIMEOUT_S": env.int("COLLECTOR_CONNECT_TIMEOUT_S", default=5),
    "STATEMENT_TIMEOUT_MS": env.int("COLLECTOR_STATEMENT_TIMEOUT_MS", default=10_000),
    "LOCK_TIMEOUT_MS": env.int("COLLECTOR_LOCK_TIMEOUT_MS", default=1_000),
    "APPLICATION_NAME": env("COLLECTOR_APPLICATION_NAME", default="pgconsole-collector"),
    # Every string literal and comment of a query text replaced before it is stored, not only the secrets the
    # redaction recognizes (collectors/redact.py): for a console whose readers must never see a literal.
    "REDACT_STRICT": env.bool("COLLECTOR_REDACT_STRICT", default=False),
    # CPU time the redaction of a query text may take, for each 64 KiB of it (collectors/redact.py): past it the text
    # is stored cut after the part redacted, with a note, so that no text built to be slow holds a collection
    # thread. A 64 KiB function body takes about 70 ms, a 64 KiB text built against the redaction about 0.3 s.
    "REDACT_BUDGET_MS": env.int("COLLECTOR_REDACT_BUDGET_MS", default=1000),
    # Each worker process keeps the statement state of the servers it collected, up to this many MB (about
    # 0.27 MB per 1,000 entries), so the next snapshot need not read it back from the history store.
    "STATE_CACHE_MB": env.int("COLLECTOR_STATE_CACHE_MB", default=512),
    # Keep monitoring connections open between snapshots (seconds; 0 disables reuse).
    "CONNECTION_IDLE_S": env.int("COLLECTOR_CONNECTION_IDLE_S", default=300),
    # A server silent this long in the middle of a snapshot has stopped answering (dead host, cut
    # network): the snapshot fails and frees its worker and lock. Unset: statement timeout + 5 s,
    # at most the server's collection interval.
    "REPLY_TIMEOUT_S": env.float("COLLECTOR_REPLY_TIMEOUT_S", default=None),
    # A whole snapshot (and a "test connection" check), connection included, is given up after this long
    # (status timeout), and within 80% of the server's interval whatever this says: a server that answers a
    # byte at a time is never silent, and must not hold a worker past its next collection.
    "SNAPSHOT_TIMEOUT_S": env.float("COLLECTOR_SNAPSHOT_TIMEOUT_S", default=30.0),
    # Linux: sent data unacknowledged this long drops the connection. Unset: the reply timeout + 5 s.
    "TCP_USER_TIMEOUT_MS": env.int("COLLECTOR_TCP_USER_TIMEOUT_MS", default=None),
    # TCP keepalives on monitoring connections (a kept idle connection to a dead host is noticed).
    "KEEPALIVES_IDLE_S": env.int("COLLECTOR_KEEPALIVES_IDLE_S", default=10),
    "KEEPALIVES_INTERVAL_S": env.int("COLLECTOR_KEEPALIVES_INTERVAL_S", default=5),
    "KEEPALIVES_COUNT": env.int("COLLECTOR_KEEPALIVES_COUNT", default=3),
    # Each reading's own (its folder's config.py: the schema reading's caps, the texts' budget, the waits' looks).
    **readings_settings(env),
}

# --- /metrics (console/views/metrics.py) -----------------------------------------
METRICS = {
    # The rates' window: the last minutes, as a scrape every 15 s to 1 min reads them.
    "WINDOW_S": env.int("METRICS_WINDOW_S", default=300),
    # One reading of the figures per scope (a user's, or an organization's for a metrics token) and kind (with or
    # without statements) for this long, whatever the token or the format: scrapers polling more often cost one
    # selector pass. A scrape that comes while another process reads them gets the previous figures, or waits up to
    # COMPUTE_WAIT_S for these (then a 503), below Prometheus' default scrape timeout of 10 s.
    "CACHE_S": env.int("METRICS_CACHE_S", default=15),
    "COMPUTE_WAIT_S": env.float("METRICS_COMPUTE_WAIT_S", default=5.0),
    # Scrapes per token and kind, as DRF writes rates; past it a 429 with Retry-After. Prometheus counts any answer
    # but a 200 as a failed scrape (up 0) and does not retry: this lets two servers (an HA pair) scrape every 5 s.
    "RATE": env("METRICS_RATE", default="30/min"),
    # Per statement only on request (?statements=N): at most this many a server, for at most this many servers.
    "STATEMENTS_TOP_N": env.int("METRICS_STATEMENTS_TOP_N", default=10),
    "STATEMENTS_MAX_SERVERS": env.int("METRICS_STATEMENTS_MAX_SERVERS", default=100),
}

# --- Plans (collectors/plans/) ----------------------------------------------------
# Plans of each server's top statements (collectors/plans/): declared with their reasons in collectors/plans/config.py.
PLANS = readings_settings(env, "PLANS")

# --- Organizations ----------------------------------------------------------
# What one organization may register, unless a console administrator set its own limits (Django admin): servers
# (about what one collection worker process serves, docs/benchmarks.md "Fleet scale"), and the shortest interval.
ORG_MAX_SERVERS = env.int("ORG_MAX_SERVERS", default=1000)
ORG_MIN_INTERVAL_S = env.int("ORG_MIN_INTERVAL_S", default=5)
# Its share of the collection workers: at most this many collections of its servers run at once, across every
# worker (collectors.shares), so that servers answering slowly, each held until its snapshot's deadline, take
# that many threads and leave the rest to the other organizations; more are put off a second or two, then
# skipped (logged) when the server's next collection is due. 0: no limit, the default, so that a single
# organization's fleet uses every worker it scales out to; a console hosting several organizations sets it
# below the threads of its collection workers together (compose runs 8).
ORG_MAX_COLLECTING = env.int("ORG_MAX_COLLECTING", default=0)
# Its share of the plans workers: at most this many plan jobs of its servers (a server's round of top statements,
# an EXPLAIN asked for by a DBA, the API or the regression alert) run at once, across every plans worker
# (collectors.shares), so that its servers failing slowly (each holding a thread up to its connection's deadline)
# leave the other organizations' plans their pace; more are put off (a second, then longer, up to 15 s), then
# skipped (logged, and said to whoever asked) when they expire. 0: no limit, as ORG_MAX_COLLECTING; a console
# hosting several organizations sets it below the threads of its plans workers together (compose runs 4).
ORG_MAX_PLANNING = env.int("ORG_MAX_PLANNING", default=0)

# --- History store retention (days) ---------------------------------------
HISTORY = {
    "RAW_RETENTION_DAYS": env.int("HISTORY_RAW_RETENTION_DAYS", default=3),
    "HOURLY_RETENTION_DAYS": env.int("HISTORY_HOURLY_RETENTION_DAYS", default=60),
    "DAILY_RETENTION_DAYS": env.int("HISTORY_DAILY_RETENTION_DAYS", default=730),
}

# --- Audit exports ------------------------------------------------------------------------------
# Where the built bundles are kept (one folder per export, each zip with its sha256 on its row).
EXPORT_ROOT = env.path("EXPORT_ROOT", default=BASE_DIR / ".run" / "exports")
# A built bundle's file is deleted this many days after it was built (the row, its checksum and the audit
# log stay, marked expired); the window can be exported again as long as the history keeps it.
EXPORT_RETENTION_DAYS = env.int("EXPORT_RETENTION_DAYS", default=30)
# A build still running after this long is stopped (the tasks worker's soft time limit) and its export failed
# with the reason; one that does not stop is killed a minute later (the hard limit). Only a process pool
# (the tasks worker, --pool prefork) enforces them.
EXPORT_TIME_LIMIT_S = env.int("EXPORT_TIME_LIMIT_S", default=25 * 60)
# Each organization's share of the exports (the tasks worker's processes serve every organization): so many
# queued or being built at once, so many asked for a day.
EXPORTS_IN_PROGRESS_PER_ORGANIZATION = env.int("EXPORTS_IN_PROGRESS_PER_ORGANIZATION", default=2)
EXPORTS_PER_ORGANIZATION_PER_DAY = env.int("EXPORTS_PER_ORGANIZATION_PER_DAY", default=20)
