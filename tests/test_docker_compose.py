"""docker-compose.yml stays consistent with the settings (no Docker engine here: it is parsed)."""
from pathlib import Path

import environ
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_services_images_and_environment():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"history", "redis", "web", "worker", "beat", "monitored"}
    assert services["history"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        # The names settings.py reads, and values it can parse.
        assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CREDENTIALS_KEY"} <= set(env)
        db = environ.Env.db_url_config(env["DATABASE_URL"])
        assert db["HOST"] == "history" and db["NAME"] == services["history"]["environment"]["POSTGRES_DB"]
        assert env["REDIS_URL"].startswith("redis://redis:")
    assert "worker" in services["worker"]["command"] and "beat" in services["beat"]["command"]
    monitored = " ".join(services["monitored"]["command"])
    assert "shared_preload_libraries=pg_stat_statements" in monitored
    assert (ROOT / services["web"]["build"] / "Dockerfile").exists()


def test_settings_read_the_same_names(monkeypatch):
    text = (ROOT / "console" / "settings.py").read_text()
    for name in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CREDENTIALS_KEY"):
        assert f'"{name}"' in text
