"""A small world in which a lock is installed the way make install and the Dockerfile install ours, offline: a folder
of wheels that also holds a release newer than the lock's of a dependency another package asks for with an extra
(as WeasyPrint asks for `fonttools[woff]>=4.59.2`), lock files pinning the older one with their hashes, and pip's
configuration pointed at that folder alone. An install that resolves dependencies against what the folder offers
picks the newer release and fails (pip before 24 refuses it for having no pin; a later pip would install it): the
issue-51 failure, which the registry produced on a fresh machine whenever it published after the lock.

The installer is the real one, requirements/installer.txt's pip, and so is the build backend, our lock's setuptools:
both downloaded once into .cache/installer, their hashes checked. The virtual environment's own pip, the one being
replaced, is whatever `python3 -m venv` gives, as on a fresh machine."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from devenv.locks import Pin, parse_lock

ROOT = Path(__file__).resolve().parent.parent
INSTALLER_LOCK = ROOT / "requirements" / "installer.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
INSTALLER_CACHE = ROOT / ".cache" / "installer"

#: The stand-in for fonttools: 1.0 is locked, 2.0 lies beside it in the folder, newer.
LOCKED, NEWER = "1.0", "2.0"
#: The stand-in for pyphen's dictionaries that are GPL alone (the Dockerfile deletes them), and one that stays.
GPL_DICTIONARIES = ("hyph_ca.dic", "hyph_kn_IN.dic", "hyph_ro_RO.dic", "hyph_te_IN.dic")
KEPT_DICTIONARY = "hyph_fr.dic"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(folder: Path, name: str, version: str, *, requires=(), extras=(), files=None) -> Path:
    """A pure-Python wheel of `name` at `version`, with its Requires-Dist and Provides-Extra lines and `files`
    (path in the wheel -> text), and a RECORD that matches."""
    stem = f"{name.replace('-', '_')}-{version}"
    metadata = [f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"]
    metadata += [f"Provides-Extra: {extra}\n" for extra in extras]
    metadata += [f"Requires-Dist: {requirement}\n" for requirement in requires]
    contents = {
        **(files or {}),
        f"{stem}.dist-info/METADATA": "".join(metadata),
        f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: pgconsole-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = [f"{path},{_record_hash(text.encode())},{len(text.encode())}" for path, text in contents.items()]
    contents[f"{stem}.dist-info/RECORD"] = "\n".join([*record, f"{stem}.dist-info/RECORD,,"]) + "\n"
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name_in_wheel, text in contents.items():
            wheel.writestr(name_in_wheel, text)
    return path


def _requirement_line(pin: Pin) -> str:
    return f"{pin.name}=={pin.version}" + "".join(f" \\\n    --hash=sha256:{h}" for h in sorted(pin.hashes)) + "\n"


def fetched(pins: list[Pin]) -> list[Path]:
    """The wheels of real packages, pinned as our lock pins them, fetched once into .cache/installer (their hashes
    checked by pip's --require-hashes) and shared by the pytest workers."""
    hashes = {h for pin in pins for h in pin.hashes}
    INSTALLER_CACHE.mkdir(parents=True, exist_ok=True)

    def cached() -> list[Path]:
        return [p for p in INSTALLER_CACHE.glob("*.whl") if hashlib.sha256(p.read_bytes()).hexdigest() in hashes]

    with open(INSTALLER_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if len(cached()) < len(pins):
            wanted = INSTALLER_CACHE / "wanted.txt"
            wanted.write_text("".join(map(_requirement_line, pins)))
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes"]
                + ["--only-binary=:all:", "-r", str(wanted), "-d", str(INSTALLER_CACHE)],
                check=True,
            )
        wheels = cached()
    assert len(wheels) == len(pins), f"{INSTALLER_CACHE}: {wheels}, wanted {pins}"
    return wheels


def _pin_lines(wheels: list[Path]) -> str:
    lines = []
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    return "".join(lines)


@dataclass(frozen=True)
class InstallWorld:
    folder: Path  # the project: requirements/, pyproject.toml
    wheels: Path  # the only place pip may take a package from

    def env(self, **extra: str) -> dict[str, str]:
        """The environment an install runs in: no configuration file of this machine's (they name other folders
        and indexes), no index, the world's wheels alone."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON"))}
        env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(self.wheels)}
        env |= {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}
        return env | extra

    def installed(self, python: Path) -> dict[str, str]:
        """name -> version of every distribution in the environment of `python`."""
        out = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json"],
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {row["name"].lower(): row["version"] for row in json.loads(out)}


def install_world(folder: Path) -> InstallWorld:
    """The project in `folder`: requirements/installer.txt (ours), runtime.txt and dev.txt pinning the stand-ins
    at their locked versions with their hashes, and a pyproject.toml built by the setuptools our lock pins (without
    an isolated environment, as ours is). `pgc-app` asks for `pgc-fonts[woff]>=1.0`, whose extra brings
    `pgc-brotli`; pgc-fonts 2.0 is in the folder too."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    installer = parse_lock(INSTALLER_LOCK.read_text()).pins["pip"]
    backend = parse_lock(RUNTIME_LOCK.read_text()).pins["setuptools"]
    for wheel in fetched([installer, backend]):
        shutil.copy(wheel, wheels)
    fonts = [
        build_wheel(wheels, "pgc-fonts", version, extras=["woff"], requires=['pgc-brotli; extra == "woff"'])
        for version in (LOCKED, NEWER)
    ]
    dictionaries = {f"pyphen/dictionaries/{name}": "% a dictionary\n" for name in (*GPL_DICTIONARIES, KEPT_DICTIONARY)}
    locked = [
        build_wheel(wheels, "pgc-app", "1.0", requires=[f"pgc-fonts[woff]>={LOCKED}"]),
        fonts[0],
        build_wheel(wheels, "pgc-brotli", "1.0"),
        build_wheel(wheels, "pyphen", "0.1", files={"pyphen/__init__.py": "", **dictionaries}),
    ]
    requirements = folder / "requirements"
    requirements.mkdir()
    shutil.copy(INSTALLER_LOCK, requirements / "installer.txt")
    for lock in ("runtime.txt", "dev.txt"):
        (requirements / lock).write_text("# the stand-ins, locked\n" + _pin_lines(locked) + _requirement_line(backend))
    (folder / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "pgc-project"\nversion = "1.0"\ndependencies = ["pgc-app"]\n\n'
        "[tool.setuptools]\npy-modules = []\n"
    )
    return InstallWorld(folder, wheels)
