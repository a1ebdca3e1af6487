"""console/settings.py: DEBUG is off unless asked for, and then real keys are required; static files
are served by the app server with DEBUG off. Each case loads the settings in a fresh interpreter."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.keys import (
    DEV_CREDENTIALS_KEY,
    DEV_SECRET_KEY,
    GENERATE_CREDENTIALS_KEY,
    GENERATE_SECRET_KEY,
    generate_credentials_key,
    generate_secret_key,
)

ROOT = Path(__file__).resolve().parents[2]
# What the settings read that a developer's shell (or `make test`) may have set.
CLEARED = ("DEBUG", "SECRET_KEY", "CREDENTIALS_KEY", "STATIC_ROOT", "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in CLEARED}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


def _load(**env: str) -> subprocess.CompletedProcess:
    return _python("import console.settings as s; print('DEBUG', s.DEBUG)", **env)


def _refused(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0, result.stdout
    assert "django.core.exceptions.ImproperlyConfigured: refusing to start" in result.stderr, result.stderr
    return result.stderr


def test_without_debug_and_without_keys_it_refuses_and_says_how_to_make_both():
    err = _refused(_load())
    assert "SECRET_KEY is not set" in err and "CREDENTIALS_KEY is not set" in err
    assert GENERATE_SECRET_KEY in err and GENERATE_CREDENTIALS_KEY in err
    assert "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())" in err
    assert "python3 console/keys.py .env.compose" in err


@pytest.mark.parametrize("debug", [None, "false", "0", "off"])
def test_the_development_keys_are_refused_outside_debug(debug):
    env = {"SECRET_KEY": DEV_SECRET_KEY, "CREDENTIALS_KEY": DEV_CREDENTIALS_KEY}
    err = _refused(_load(**env) if debug is None else _load(DEBUG=debug, **env))
    assert "SECRET_KEY is the development key" in err and "CREDENTIALS_KEY is the development key" in err
    assert GENERATE_CREDENTIALS_KEY in err


def test_the_key_docker_compose_once_committed_is_refused():
    err = _refused(_load(SECRET_KEY="change-me-in-production", CREDENTIALS_KEY=generate_credentials_key()))
    assert "SECRET_KEY is the development key" in err and "CREDENTIALS_KEY" not in err


def test_a_weak_secret_key_and_a_malformed_credentials_key_are_refused():
    err = _refused(_load(SECRET_KEY="short", CREDENTIALS_KEY="not-a-fernet-key"))
    assert "SECRET_KEY is too weak" in err and "CREDENTIALS_KEY is not a Fernet key" in err


def test_with_real_keys_it_loads_with_debug_off():
    result = _load(SECRET_KEY=generate_secret_key(), CREDENTIALS_KEY=generate_credentials_key())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "DEBUG False"


@pytest.mark.parametrize("debug", ["true", "1", "on"])
def test_debug_brings_the_development_keys(debug):
    result = _python(
        "import console.settings as s; from console import keys; print(s.DEBUG, "
        "s.SECRET_KEY == keys.DEV_SECRET_KEY, s.CREDENTIALS_KEY == keys.DEV_CREDENTIALS_KEY)",
        DEBUG=debug,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "True"]


def test_passwords_are_hashed_with_djangos_pbkdf2_at_its_full_rounds():
    """The product keeps Django's hasher and its rounds; only the tests' own settings take one round
    (tests/hashers.py), and their hashes name the same algorithm, so the product's processes check them."""
    result = _python(
        "import django; django.setup()\n"
        "from django.contrib.auth.hashers import PBKDF2PasswordHasher, get_hasher, make_password\n"
        "algorithm, rounds, salt, digest = make_password('a-long-production-password').split('$')\n"
        "print(type(get_hasher()) is PBKDF2PasswordHasher, algorithm, rounds == str(PBKDF2PasswordHasher.iterations),"
        " int(rounds) >= 1_000_000)\n"
        "from tests.hashers import OneRoundPBKDF2PasswordHasher\n"
        "from django.contrib.auth.hashers import check_password\n"
        "print(check_password('pw', OneRoundPBKDF2PasswordHasher().encode('pw', 'salt1234')))\n",
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="console.settings",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "pbkdf2_sha256", "True", "True", "True"]


def test_a_malformed_credentials_key_is_refused_even_with_debug():
    err = _refused(_load(DEBUG="true", CREDENTIALS_KEY="ZGV2"))
    assert "CREDENTIALS_KEY is not a Fernet key" in err


def test_static_files_are_served_with_debug_off(collected_static):
    """collectstatic (as the image build runs it, once for the run: tests/static_world.py), then the app itself
    serves the hashed, compressed files."""
    env = {
        "SECRET_KEY": generate_secret_key(),
        "CREDENTIALS_KEY": generate_credentials_key(),
        "STATIC_ROOT": str(collected_static.root),
        "ALLOWED_HOSTS": "testserver",
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    assert (collected_static.root / "staticfiles.json").exists()
    serve = _python(
        "import django; django.setup()\n"
        "from django.conf import settings\n"
        "from django.templatetags.static import static\n"
        "from django.test import Client\n"
        "url = static('admin/css/base.css')\n"
        "assert url != '/static/admin/css/base.css', url  # the hashed name from the manifest\n"
        "for name in ('vendor/chartjs/chart.umd.min.js', 'vendor/htmx/htmx.min.js', 'console/console.js'):\n"
        "    assert static(name) != '/static/' + name, name  # the console's own assets are collected too\n"
        "response = Client().get(url, headers={'accept-encoding': 'gzip'})\n"
        "body = b''.join(response.streaming_content)\n"
        "print(settings.DEBUG, response.status_code, response['Content-Encoding'], 'immutable' in "
        "response['Cache-Control'], len(body) > 0)\n"
        "print(Client().get('/static/admin/css/missing.css').status_code)\n",
        **env,
    )
    assert serve.returncode == 0, serve.stderr
    assert serve.stdout.split() == ["False", "200", "gzip", "True", "True", "404"]


def test_the_image_collects_swagger_ui_compressed_its_source_maps_as_they_are_and_no_redoc(collected_static):
    """What collectstatic leaves out of the image and of its compression: the ReDoc bundle the console never serves
    (its API docs are Swagger UI's), and the brotli and gzip copies of source maps (read by developer tools only)."""
    root = collected_static.root
    manifest = json.loads((root / "staticfiles.json").read_text())["paths"]
    bundle = manifest["drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"]
    assert (root / f"{bundle}.br").exists() and (root / f"{bundle}.gz").exists()
    maps = sorted(root.rglob("*.map"))
    assert any("swagger-ui-bundle" in m.name for m in maps), maps
    assert not [m for m in maps if (m.parent / f"{m.name}.br").exists() or (m.parent / f"{m.name}.gz").exists()]
    assert not [name for name in manifest if "redoc" in name.lower()]
    assert not list(root.rglob("*redoc*"))


def test_the_console_and_its_static_files_have_their_own_app_configs():
    """The console's config registers its deploy checks and second-factor hook when Django is ready: a second
    config class in console/apps.py once made Django take a bare one, and `check --deploy` lost its checks."""
    from django.apps import apps
    from django.core.checks.registry import registry

    from console.apps import ConsoleConfig
    from console.static_files import StaticFiles

    assert type(apps.get_app_config("console")) is ConsoleConfig
    assert type(apps.get_app_config("staticfiles")) is StaticFiles
    assert "plain_http" in {check.__name__ for check in registry.get_checks(include_deployment_checks=True)}
