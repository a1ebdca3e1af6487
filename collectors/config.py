"""Each reading's settings, declared in its own folder (collectors/<reading>/config.py: SETTINGS) and read from the
environment by console/settings.py: into settings.COLLECTOR beside the collection's own (connections, timeouts), or
into the group a reading names (the plans': settings.PLANS, each from PLANS_<key>).

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
    key: str  # the key in settings.<group>; its environment variable is <group>_<key>
    kind: type  # int, float, bool or str
    default: Value
    help: str  # what it bounds, and why its default is what it is
    group: str = "COLLECTOR"

    @property
    def variable(self) -> str:
        return f"{self.group}_{self.key}"


def declared() -> tuple[Setting, ...]:
    """Every reading's settings (collectors/*/config.py), folder by folder; a key declared twice is refused."""
    import collectors

    found: dict[str, Setting] = {}  # by variable
    for module in sorted(pkgutil.iter_modules(collectors.__path__), key=lambda m: m.name):
        name = f"collectors.{module.name}.config"
        if not module.ispkg or importlib.util.find_spec(name) is None:
            continue
        for setting in importlib.import_module(name).SETTINGS:
            if setting.variable in found:
                raise ValueError(f"{setting.variable} is declared twice ({name})")
            found[setting.variable] = setting
    return tuple(found.values())


def from_environment(env: Any, group: str = "COLLECTOR") -> dict[str, Value]:
    """Each setting declared for `group`, from its environment variable, else its default, read as its kind
    (django-environ's env.int, env.float, env.bool, env.str)."""
    return {s.key: getattr(env, s.kind.__name__)(s.variable, default=s.default) for s in declared() if s.group == group}
