"""Each reading's settings, declared in its own folder (collectors/<reading>/config.py: SETTINGS) and read from the
environment into settings.COLLECTOR by console/settings.py, beside the collection's own (connections, timeouts).

Pure: console/settings.py imports it while Django's settings are being read, so it and every config.py import
nothing of Django nor of the product's apps. docs/configuration.md says each setting to the operator."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from typing import Any

Value = int | float | bool | str | None


@dataclass(frozen=True)
class Setting:
    key: str  # settings.COLLECTOR's key; its environment variable is COLLECTOR_<key>
    kind: type  # int, float, bool or str
    default: Value
    help: str  # what it bounds, and why its default is what it is

    @property
    def variable(self) -> str:
        return f"COLLECTOR_{self.key}"


def declared() -> tuple[Setting, ...]:
    """Every reading's settings (collectors/*/config.py), folder by folder; a key declared twice is refused."""
    import collectors

    found: dict[str, Setting] = {}
    for module in sorted(pkgutil.iter_modules(collectors.__path__), key=lambda m: m.name):
        name = f"collectors.{module.name}.config"
        if not module.ispkg or importlib.util.find_spec(name) is None:
            continue
        for setting in importlib.import_module(name).SETTINGS:
            if setting.key in found:
                raise ValueError(f"COLLECTOR setting {setting.key} is declared twice ({name})")
            found[setting.key] = setting
    return tuple(found.values())


def from_environment(env: Any) -> dict[str, Value]:
    """Each declared setting from its environment variable, else its default, read as its kind (django-environ's
    env.int, env.float, env.bool, env.str)."""
    return {s.key: getattr(env, s.kind.__name__)(s.variable, default=s.default) for s in declared()}
