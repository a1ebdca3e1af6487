"""The lock files (requirements/*.txt, written by `make lock`): every package, transitive ones too, pinned with its
hashes, in agreement with pyproject.toml and with each other, and installed that way by `make install` and the
Dockerfile, which are read here (the Makefile as make reads it, the Dockerfile as Docker does)."""

from __future__ import annotations

import functools
import importlib.metadata
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from devenv.locks import Lock, Pin, parse_lock, unmet_requirements
from tests.dockerfile import context_misses, copy_paths, dockerfile, dockerignore, pip_installs
from tests.install_world import LOCKED, install_world

ROOT = Path(__file__).resolve().parent.parent
INSTALLER = "requirements/installer.txt"
INSTALLER_IN = "requirements/installer.in"
RUNTIME = "requirements/runtime.txt"
DEV = "requirements/dev.txt"
BUILD_IN = "requirements/build.in"
LOCKS = (INSTALLER, RUNTIME, DEV)


# --- The lock files ----------------------------------------------------------------------------


@functools.cache
def lock(path: str) -> Lock:
    return parse_lock((ROOT / path).read_text())


@functools.cache
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def runtime_requirements() -> list[Requirement]:
    return [Requirement(r) for r in pyproject()["project"]["dependencies"]]


def extra_test_requirements() -> list[Requirement]:
    return [Requirement(r) for r in pyproject()["project"]["optional-dependencies"]["test"]]


def build_requirements() -> list[Requirement]:
    return [Requirement(r) for r in pyproject()["build-system"]["requires"]]


def test_the_parser_reads_pins_and_sees_what_is_not_hashed():
    text = (
        "# a header\n"
        "Django==5.2.19 \\\n"
        f"    --hash=sha256:{'a' * 64} \\\n"
        f"    --hash=sha256:{'b' * 64}\n"
        "    # via pgconsole (pyproject.toml)\n"
        "zope.interface==7.0\n"
        "-e .\n"
        f"requests>=2 --hash=sha256:{'c' * 64}\n"
        f"numpy==2.4.6 --hash=md5:{'d' * 32}\n"
    )
    parsed = parse_lock(text)
    assert parsed.pins == {"django": Pin("django", "5.2.19", frozenset({"a" * 64, "b" * 64}))}
    assert parsed.unhashed == [
        "zope.interface==7.0",
        "-e .",
        f"requests>=2 --hash=sha256:{'c' * 64}",
        f"numpy==2.4.6 --hash=md5:{'d' * 32}",
    ]


@pytest.mark.parametrize("path", LOCKS)
def test_every_line_of_the_lock_is_pinned_and_hashed(path):
    parsed = lock(path)
    assert not parsed.unhashed, f"{path}: not `name==version` with sha256 hashes (run make lock): {parsed.unhashed}"
    assert len(parsed.pins) > (0 if path == INSTALLER else 50), "the transitive dependencies too"
    # The project is installed from the working tree (pip install --no-deps -e .), never from the lock.
    assert canonicalize_name(pyproject()["project"]["name"]) not in parsed.pins


def _check_pinned(requirements: list[Requirement], path: str) -> None:
    pins = lock(path).pins
    for requirement in requirements:
        pin = pins.get(canonicalize_name(requirement.name))
        assert pin is not None, f"{requirement} is not in {path}: run make lock"
        assert pin.hashes, f"{pin.name} has no hash in {path}"
        assert requirement.specifier.contains(Version(pin.version), prereleases=True), (
            f"{path} pins {pin.name}=={pin.version}, pyproject.toml asks for {requirement}: run make lock"
        )


def test_every_runtime_dependency_is_locked_for_the_image_and_for_development():
    assert len(runtime_requirements()) > 10
    _check_pinned(runtime_requirements(), RUNTIME)
    _check_pinned(runtime_requirements(), DEV)


def test_every_test_requirement_is_locked_for_development():
    names = {canonicalize_name(r.name) for r in extra_test_requirements()}
    assert {"pytest", "uv", "pip-audit"} <= names
    _check_pinned(extra_test_requirements(), DEV)


def test_the_build_backend_is_locked_for_both():
    # Both installs build the project with --no-build-isolation: its backend must come from the lock.
    build_in = [Requirement(line) for line in (ROOT / BUILD_IN).read_text().splitlines() if line and line[0] != "#"]
    assert [str(r) for r in build_in] == [str(r) for r in build_requirements()], "build.in is pyproject's requires"
    _check_pinned(build_requirements(), RUNTIME)
    _check_pinned(build_requirements(), DEV)


def test_the_check_sees_a_pin_pyproject_does_not_allow():
    with pytest.raises(AssertionError, match="run make lock"):
        _check_pinned([Requirement("Django==4.2.0")], RUNTIME)
    with pytest.raises(AssertionError, match="not in"):
        _check_pinned([Requirement("left-pad==1.0")], RUNTIME)


def test_the_runtime_lock_is_within_the_dev_lock_at_the_same_versions():
    runtime, dev = lock(RUNTIME).pins, lock(DEV).pins
    differ = {
        name: (pin.version, dev[name].version if name in dev else None)
        for name, pin in runtime.items()
        if dev.get(name) != pin  # version and hashes
    }
    assert not differ, f"runtime.txt and dev.txt disagree (name: (runtime, dev)), run make lock: {differ}"
    assert set(dev) > set(runtime), "dev.txt adds the test extra"


def _locked_extras(requirements: list[Requirement]) -> list[tuple[str, Requirement]]:
    """(extra, requirement) for what each extra asked for (psycopg[binary]) brings on this machine, from the
    installed distribution's metadata."""
    out = []
    for requirement in requirements:
        for extra in sorted(requirement.extras):
            for line in importlib.metadata.requires(requirement.name) or []:
                needed = Requirement(line)
                if "extra" in str(needed.marker) and needed.marker.evaluate({**default_environment(), "extra": extra}):
                    out.append((f"{requirement.name}[{extra}]", needed))
    return out


def test_what_the_extras_bring_is_locked_too():
    runtime = _locked_extras(runtime_requirements())
    assert any(needed.name == "psycopg-binary" for _, needed in runtime), runtime
    for extra, needed in runtime:
        assert canonicalize_name(needed.name) in lock(RUNTIME).pins, f"{extra} needs {needed}"
    for extra, needed in _locked_extras(extra_test_requirements()):
        assert canonicalize_name(needed.name) in lock(DEV).pins, f"{extra} needs {needed}"


def test_the_installer_lock_is_pip_alone_at_the_version_dev_pins():
    # make install and the Dockerfile install it first, alone and with --no-deps: it must need nothing else.
    assert [line for line in (ROOT / INSTALLER_IN).read_text().splitlines() if line[:1] != "#"] == ["pip"]
    installer = lock(INSTALLER).pins
    assert list(installer) == ["pip"], installer
    assert not importlib.metadata.requires("pip"), "pip installs alone"
    assert installer["pip"] == lock(DEV).pins["pip"], "make lock constrains dev.txt to installer.txt"


def _roots(path: str) -> list[Requirement]:
    test = extra_test_requirements() if path == DEV else []
    return runtime_requirements() + build_requirements() + test


@pytest.mark.parametrize("path", (RUNTIME, DEV))
def test_installed_without_resolving_each_lock_meets_every_requirement_extras_included(path):
    # What --no-deps trusts: from pyproject.toml, every package reached is pinned at a version its askers allow,
    # with what their extras bring (read from the installed distributions: this environment is the dev lock).
    assert unmet_requirements(lock(path).pins, _roots(path), importlib.metadata.requires) == []


def test_the_requirement_check_sees_what_an_extra_brings_which_pip_check_does_not():
    # WeasyPrint asks for fonttools[woff]; woff brings brotli. A lock without it passes pip check.
    pins = {name: pin for name, pin in lock(RUNTIME).pins.items() if name != "brotli"}
    unmet = unmet_requirements(pins, _roots(RUNTIME), importlib.metadata.requires)
    assert [u for u in unmet if u.startswith("fonttools==") and "needs brotli" in u and "has nothing" in u], unmet
    # The same check on made-up metadata: a version the asker does not allow, a marker for another platform.
    requires = {"a": ["b[x]>=2", 'c; sys_platform == "win32"'], "b": ['d; extra == "x"', 'e; extra == "y"']}
    pins = {name: Pin(name, "1.0", frozenset()) for name in "abd"}
    assert unmet_requirements(pins, [Requirement("a")], requires.get) == ["a==1.0 needs b[x]>=2, the lock has 1.0"]
    pins["b"] = Pin("b", "2.0", frozenset())
    assert unmet_requirements(pins, [Requirement("a")], requires.get) == []
    del pins["d"]
    assert unmet_requirements(pins, [Requirement("a")], requires.get) == [
        'b==2.0 needs d; extra == "x", the lock has nothing'
    ]


def test_this_environment_is_the_dev_lock():
    # What make install put here: every locked package at its locked version (a changed lock: make install).
    wrong = {}
    for pin in lock(DEV).pins.values():
        try:
            installed = importlib.metadata.version(pin.name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed is None or Version(installed) != Version(pin.version):
            wrong[pin.name] = (pin.version, installed)
    assert not wrong, f"locked and installed versions differ (name: (locked, installed)), run make install: {wrong}"


# --- The Makefile, as make reads it --------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    prerequisites: tuple[str, ...]  # normal and order-only, variables expanded
    recipe: tuple[str, ...]  # one command a line, continuations joined, variables expanded


def _logical_lines(text: str) -> list[str]:
    out, pending = [], ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def parse_makefile(text: str) -> dict[str, Rule]:
    """Targets -> their rule: `$(NAME)` of the Makefile's own variables expanded (others kept as written), `$$` as
    the shell gets it, runs of blanks as one. Enough for this Makefile: no pattern rules, conditionals or define."""
    variables: dict[str, str] = {}

    def expand(value: str) -> str:
        for _ in range(10):
            value = re.sub(r"(?<!\$)\$\((\w+)\)", lambda m: variables.get(m[1], m[0]), value)
        return value

    rules: dict[str, Rule] = {}
    current: list[str] = []
    for line in _logical_lines(text):
        if line.startswith("\t"):
            for target in current:
                rule = rules[target]
                command = " ".join(expand(line).split()).replace("$$", "$")
                rules[target] = Rule(rule.prerequisites, (*rule.recipe, command))
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assignment = re.match(r"([\w.]+)\s*(:=|\?=|=)\s*(.*)$", line)
        if assignment:
            name, op, value = assignment.groups()
            if op != "?=" or name not in variables:
                variables[name] = " ".join(value.split())
            current = []
            continue
        targets, _, prerequisites = line.partition(":")
        current = expand(targets).split()
        prerequisites = tuple(p for p in expand(prerequisites).split() if p != "|")
        for target in current:
            rules[target] = Rule(prerequisites, ())
    return rules


@functools.cache
def makefile() -> dict[str, Rule]:
    return parse_makefile((ROOT / "Makefile").read_text())


def test_the_makefile_parser():
    rules = parse_makefile(
        "A := x \\\n\ty\nB ?= $(A) z\nB ?= no\n\n.PHONY: t\nt: $(B) | o\n\techo $(A) \\\n\t  $$HOME $(C)\n\t@true\n"
    )
    assert rules["t"] == Rule(("x", "y", "z", "o"), ("echo x y $HOME $(C)", "@true"))


def _depends_on(target: str, prerequisite: str, rules: dict[str, Rule]) -> bool:
    todo, seen = [target], set()
    while todo:
        name = todo.pop()
        if name == prerequisite:
            return True
        if name not in seen and name in rules:
            seen.add(name)
            todo += rules[name].prerequisites
    return False


def _option(args: list[str], name: str) -> str | None:
    """The value of `name VALUE` or `name=VALUE` among pip's arguments."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return None


def _from_the_lock_alone(args: list[str]) -> bool:
    """A pip install that reads nothing but the lock: hashed packages installed as listed, no dependency resolved
    (--no-deps), or the project alone (no dependency, no isolated build environment, whose build backend would be
    downloaded without a hash)."""
    return "--no-deps" in args and ("--require-hashes" in args or "--no-build-isolation" in args)


def test_make_install_installs_the_installer_then_the_dev_lock_as_written_then_the_project_alone():
    rules = makefile()
    assert _depends_on("install", ".venv/.installed", rules) and _depends_on("test", ".venv/.installed", rules)
    rule = rules[".venv/.installed"]
    # The stamp is made again when a lock or pyproject.toml changes.
    assert {INSTALLER, RUNTIME, DEV, "pyproject.toml"} <= set(rule.prerequisites), rule.prerequisites
    installs = [args for command in rule.recipe for args in pip_installs(command)]
    assert len(installs) == 3, installs
    installer, dependencies, project = installs
    for args, path in ((installer, INSTALLER), (dependencies, DEV)):
        assert {"--require-hashes", "--no-deps"} <= set(args) and _option(args, "-r") == path, args
    assert {"--no-deps", "--no-build-isolation"} <= set(project) and _option(project, "-e") == ".", project
    # --no-deps trusts the lock: pip check says so when it is not complete, before the stamp, last.
    assert rule.recipe[-2:] == (".venv/bin/python -m pip check", "touch $@")


def test_no_pip_install_of_the_makefile_or_the_dockerfile_reads_more_than_the_lock():
    commands = [command for rule in makefile().values() for command in rule.recipe]
    commands += [ins.args for ins in dockerfile() if ins.keyword == "RUN"]
    installs = [args for command in commands for args in pip_installs(command)]
    assert len(installs) >= 6, installs
    assert [args for args in installs if not _from_the_lock_alone(args)] == []
    # ... and the check sees the installs this replaced: the project's extra resolved against the registry, and
    # the hashed lock with its dependencies resolved (issue 51).
    assert not _from_the_lock_alone(pip_installs("$(PYTHON) -m pip install -e '.[test]'")[0])
    assert not _from_the_lock_alone(pip_installs("$(PYTHON) -m pip install --require-hashes -r req/dev.txt")[0])


def test_make_lock_writes_the_three_files_with_hashes_dev_constrained_by_the_others():
    recipe = makefile()["lock"].recipe
    compiles = [command for command in recipe if "pip compile" in command]
    assert len(compiles) == 3, recipe
    installer, runtime, dev = compiles
    for command in compiles:
        assert "--generate-hashes" in command and "--python-version 3.11" in command
        assert "--python-platform x86_64-manylinux_2_28" in command
    assert f"{INSTALLER_IN} -o {INSTALLER}" in installer and "pyproject.toml" not in installer
    for command in (runtime, dev):
        assert "requirements/build.in" in command
    assert f"-o {RUNTIME}" in runtime and "--extra" not in runtime
    assert f"-o {DEV}" in dev and "--extra test" in dev and f"-c {RUNTIME}" in dev and f"-c {INSTALLER}" in dev
    # The compiler is the one the lock pins, installed with its hashes.
    installs = [args for command in recipe for args in pip_installs(command)]
    assert installs and all("--require-hashes" in args for args in installs), installs


def test_make_audit_checks_both_locks():
    recipe = " ".join(makefile()["audit"].recipe)
    assert "pip-audit" in recipe and "--strict" in recipe and "--require-hashes" in recipe
    assert f"-r {RUNTIME}" in recipe and f"-r {DEV}" in recipe


def _make_installed(world) -> subprocess.CompletedProcess:
    """make's .venv/.installed, as the Makefile says it, in the world's folder and environment."""
    return subprocess.run(
        ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), ".venv/.installed"],
        cwd=world.folder,
        env=world.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_make_installs_the_lock_as_written_never_a_newer_release_the_registry_offers(tmp_path):
    """The Makefile's own recipe, run by make in a fresh folder with no .venv: `python3 -m venv` and its pip, then
    the install, offline, from a folder that holds a newer release of a dependency asked for with an extra."""
    world = install_world(tmp_path)
    made = _make_installed(world)
    assert made.returncode == 0, made.stdout[-4000:] + made.stderr[-4000:]
    installed = world.installed(world.folder / ".venv/bin/python")
    assert installed["pgc-fonts"] == LOCKED, "the lock's release, not the newer one beside it"
    assert (installed["pgc-app"], installed["pgc-brotli"], installed["pgc-project"]) == ("1.0", "1.0", "1.0")
    assert installed["pip"] == lock(INSTALLER).pins["pip"].version, "the installer the lock pins"
    assert "pip check" in made.stdout and (world.folder / ".venv/.installed").exists()


def test_make_install_stops_on_a_lock_that_misses_a_dependency(tmp_path):
    world = install_world(tmp_path)
    dev = world.folder / DEV
    dev.write_text(re.sub(r"pgc_fonts==.*\n.*\n", "", dev.read_text()))
    assert "pgc_fonts" not in dev.read_text() and "pgc_app" in dev.read_text()
    made = _make_installed(world)
    assert made.returncode != 0
    assert "pgc-app 1.0 requires pgc-fonts, which is not installed." in made.stdout, made.stdout[-2000:]
    assert not (world.folder / ".venv/.installed").exists(), "no stamp: the next make install tries again"


# --- The Dockerfile ------------------------------------------------------------------------------


def test_the_image_installs_the_installer_then_the_runtime_lock_as_written_before_the_source():
    instructions = dockerfile()
    copies = [ins for ins in instructions if ins.keyword == "COPY"]
    whole = next(copy for copy in copies if copy_paths(instructions, copy)[0] == ["."])
    workdir = copy_paths(instructions, whole)[1]
    end = instructions.index(whole)
    for path in (INSTALLER, RUNTIME):
        lock_copy = next(copy for copy in copies if copy_paths(instructions, copy)[0] == [path])
        assert copy_paths(instructions, lock_copy)[1] == f"{workdir}/{path}"
        assert instructions.index(lock_copy) < end, "ahead of the source, so its layer is built again only for it"
    runs = [ins.args for ins in instructions[:end] if ins.keyword == "RUN" and pip_installs(ins.args)]
    assert len(runs) == 1, runs
    ahead = pip_installs(runs[0])
    assert [_option(args, "-r") for args in ahead] == [INSTALLER, RUNTIME], ahead
    assert all({"--require-hashes", "--no-deps"} <= set(args) for args in ahead), ahead
    assert "&& pip check &&" in runs[0], "as make install: --no-deps trusts the lock, pip check says if it is not"
    after = [args for ins in instructions[end:] if ins.keyword == "RUN" for args in pip_installs(ins.args)]
    assert len(after) == 1 and {"--no-deps", "--no-build-isolation"} <= set(after[0]), after
    assert _option(after[0], "-e") == ".", after[0]


def test_the_locks_are_in_the_build_context():
    assert context_misses([INSTALLER, RUNTIME, DEV, BUILD_IN], dockerignore()) == []
