"""collectors.config: each reading's settings declared in its own folder, read from the environment into
settings.COLLECTOR beside the collection's own; pure, as console/settings.py imports it before Django is set up."""

import subprocess
import sys

import environ
import pytest

from collectors.config import Setting, declared, from_environment
from tests.test_tree import ROOT


def test_every_readings_settings_are_declared_each_once_with_its_kind_and_what_it_bounds():
    variables = [s.variable for s in declared()]
    assert len(variables) == len(set(variables))
    assert {"COLLECTOR_SCHEMA_MAX_TABLES", "COLLECTOR_TEXTS_PER_SNAPSHOT", "PLANS_TOP_N"} <= set(variables)
    assert {s.group for s in declared()} == {"COLLECTOR", "PLANS"}
    for s in declared():
        assert s.variable == f"{s.group}_{s.key}" and isinstance(s.default, s.kind | None) and s.help, s


def test_a_setting_comes_from_its_environment_variable_else_its_default(monkeypatch):
    for s in declared():
        monkeypatch.delenv(s.variable, raising=False)
    assert from_environment(environ.Env()) == {s.key: s.default for s in declared() if s.group == "COLLECTOR"}
    assert from_environment(environ.Env(), "PLANS") == {s.key: s.default for s in declared() if s.group == "PLANS"}
    monkeypatch.setenv("COLLECTOR_SCHEMA_MAX_TABLES", "7")
    monkeypatch.setenv("COLLECTOR_ACTIVITY_SPAN_S", "0.5")
    monkeypatch.setenv("PLANS_ENABLED", "false")
    read = from_environment(environ.Env())
    assert (read["SCHEMA_MAX_TABLES"], read["ACTIVITY_SPAN_S"]) == (7, 0.5)
    assert from_environment(environ.Env(), "PLANS")["ENABLED"] is False


def test_the_console_reads_them_from_its_environment():
    """As the image runs it: the variable set, COLLECTOR holds its value."""
    code = "from django.conf import settings; print(settings.COLLECTOR['SCHEMA_MAX_TABLES'], settings.PLANS['TOP_N'])"
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env={
            **__import__("os").environ,
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DEBUG": "true",
            "COLLECTOR_SCHEMA_MAX_TABLES": "42",
            "PLANS_TOP_N": "3",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["42", "3"]


def test_the_declarations_import_nothing_of_django_nor_of_the_product():
    """Imported while Django's settings are read: a config.py importing a model would fail at start-up."""
    code = (
        "import sys; from collectors.config import declared; declared(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'history', 'inventory', 'readtier')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_key_declared_twice_is_refused(monkeypatch):
    from collectors.waits import config as waits_config

    monkeypatch.setattr(waits_config, "SETTINGS", (*waits_config.SETTINGS, Setting("SCHEMA_SECONDS", float, 1.0, "")))
    with pytest.raises(ValueError, match="COLLECTOR_SCHEMA_SECONDS is declared twice"):
        declared()


def test_the_operators_documentation_names_every_readings_setting():
    documented = (ROOT / "docs/configuration.md").read_text()
    assert [s.variable for s in declared() if f"`{s.variable}`" not in documented] == []
