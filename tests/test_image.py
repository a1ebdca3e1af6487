"""The image holds the whole product and every system library the app loads. There is no Docker engine here:
the Dockerfile and .dockerignore are read (with Docker's own matching rules), and the app is run on this
machine, Debian 12 like the image, to see which Debian packages it really maps."""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest

from console import settings as console_settings
from devenv.locks import parse_lock
from tests.dockerfile import (
    Instruction,
    apt_installed,
    context_misses,
    copy_paths,
    dockerfile,
    dockerfile_env,
    dockerignore,
    excluded,
    ignore_patterns,
    pip_installs,
)
from tests.install_world import KEPT_DICTIONARY, LOCKED, install_world

ROOT = Path(__file__).resolve().parent.parent
APP_DIR = "/app"


def product_paths() -> list[str]:
    """What the image must hold: every package pyproject.toml installs, every app of INSTALLED_APPS that is a
    folder here (not a library's), templates/, static/, manage.py and pyproject.toml."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    apps = [app.split(".")[0] for app in console_settings.INSTALLED_APPS if (ROOT / app.split(".")[0]).is_dir()]
    return sorted({*packages, *apps, "templates", "static", "manage.py", "pyproject.toml"})


def files_under(name: str) -> list[str]:
    """The files of `name` (a file, or a folder walked), relative to the repository; bytecode aside (it is not
    the product: Python writes it again)."""
    top = ROOT / name
    if top.is_file():
        return [name]
    out = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        out += [Path(folder, f).relative_to(ROOT).as_posix() for f in files if not f.endswith(".pyc")]
    return out


@pytest.mark.parametrize(
    "patterns, path, out",
    [
        (["*.pyc"], "a.pyc", True),
        (["*.pyc"], "console/a.pyc", False),  # `*` stays in its folder, and a pattern is from the root
        (["**/*.pyc"], "console/views/a.pyc", True),
        (["**/__pycache__"], "console/__pycache__/a.cpython-311.pyc", True),  # its folder matches
        (["docs"], "docs/screenshots/fleet.png", True),
        (["/docs/"], "docs/read-tier.md", True),
        (["docs", "!docs/read-tier.md"], "docs/read-tier.md", False),
        (["docs", "!docs/read-tier.md"], "docs/benchmarks.md", True),
        (["!docs/read-tier.md", "docs"], "docs/read-tier.md", True),  # the last match wins
        (["**", "!console"], "console/views/health.py", False),
        (["**", "!console"], "tests/settings.py", True),
        (["**", "!util/docker/web", "util/docker/web/foo"], "util/docker/web/foo", True),
        ([".env*"], ".env.compose", True),
        ([".env*"], "console/.env", False),
        (["dir/**"], "dir", False),
        (["dir/**"], "dir/dir2/file", True),
        (["**/dir2/*"], "dir/dir2/file", True),
        (["a[b-d]e"], "ace", True),
        (["a[^b-d]e"], "ace", False),
        (["abc?def"], "abcZdef", True),
        (["abc.def"], "abcZdef", False),
        (["a(b)c/def"], "a(b)c/def", True),
        (["dist/*.whl"], "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl", True),
    ],
)
def test_dockerignore_matching_follows_docker(patterns, path, out):
    # Hand cases and a few of moby/patternmatcher's own (patternmatcher_test.go), read as .dockerignore lines.
    assert excluded(path, ignore_patterns("\n".join(patterns))) is out


def test_dockerignore_patterns_are_read_as_docker_reads_them():
    text = "\ufeff# a comment\n  .venv  \n\n/tests/\n! docs/keep.md\n  # not a comment: Docker trims after\n"
    assert ignore_patterns(text) == [".venv", "tests", "!docs/keep.md", "# not a comment: Docker trims after"]
    with pytest.raises(ValueError):
        excluded("a", ["!"])


# What may be copied before the whole context, to the same place in /app: the installer and the lock the dependency
# layer installs (tests/test_lock.py checks how), so a change of the source does not install them again.
COPIED_AHEAD = {"requirements/installer.txt", "requirements/runtime.txt"}


def test_the_dockerfile_copies_the_whole_build_context_to_app_once():
    instructions = dockerfile()
    copies = [ins for ins in instructions if ins.keyword in ("COPY", "ADD")]
    assert all(c.keyword == "COPY" for c in copies), [f"{c.keyword} {c.args}" for c in copies]
    for copy in copies:
        assert not any(word.startswith("--from") for word in shlex.split(copy.args)), "the context, not another stage"
    whole = [copy for copy in copies if copy_paths(instructions, copy)[0] == ["."]]
    assert len(whole) == 1, "one COPY of the whole context: a new app cannot be forgotten"
    assert copy_paths(instructions, whole[0])[1] == APP_DIR
    for copy in copies[: copies.index(whole[0])]:
        sources, dest = copy_paths(instructions, copy)
        assert len(sources) == 1 and sources[0] in COPIED_AHEAD, f"COPY {copy.args}: only the lock goes ahead"
        assert dest == posixpath.join(APP_DIR, sources[0]), f"COPY {copy.args}: where the context puts it"
    assert copies[-1] == whole[0], "nothing is copied over the context"
    # settings.py's BASE_DIR is the folder above console/: templates/ and static/ are found next to it.
    assert Path(console_settings.BASE_DIR) == ROOT and console_settings.STATICFILES_DIRS == [ROOT / "static"]
    # ... so the project is installed editable, from /app, after the context is there.
    after = [ins.args for ins in instructions[instructions.index(whole[0]) :] if ins.keyword == "RUN"]
    editable = [args for run in after for args in pip_installs(run) if "-e" in args]
    assert editable and all(args[args.index("-e") + 1] == "." for args in editable), editable


def test_the_images_install_lines_install_a_lock_as_written_never_a_newer_release(tmp_path):
    """The Dockerfile's RUN that installs the lock, run as Docker runs it (`/bin/sh -c`, in /app's stand-in, with
    the ENV set above it) on a fresh Python 3.11 with the pip it comes with, as the base image's is: offline, from a
    folder that also holds a newer release of a dependency asked for with an extra (tests/install_world.py)."""
    world = install_world(tmp_path / "app")
    instructions = dockerfile()
    whole = next(ins for ins in instructions if ins.keyword == "COPY" and copy_paths(instructions, ins)[0] == ["."])
    ahead = instructions[: instructions.index(whole)]
    run = next(ins.args for ins in ahead if ins.keyword == "RUN" and pip_installs(ins.args))
    for copy in (ins for ins in ahead if ins.keyword == "COPY"):
        assert (world.folder / copy_paths(instructions, copy)[0][0]).is_file(), copy.args  # the world has them
    base = tmp_path / "base"
    subprocess.run(["python3", "-m", "venv", str(base)], check=True, timeout=120)
    env = world.env(**dockerfile_env(ahead), PATH=f"{base}/bin:{os.environ['PATH']}")
    done = subprocess.run(
        ["/bin/sh", "-c", run], cwd=world.folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    installed = world.installed(base / "bin" / "python")
    assert installed["pgc-fonts"] == LOCKED, "the lock's release, not the newer one beside it"
    assert installed["pip"] == parse_lock((ROOT / "requirements/installer.txt").read_text()).pins["pip"].version
    assert "No broken requirements found." in done.stdout
    # ... and in the same layer, the dictionaries that are GPL alone are gone, the others stay.
    (dictionaries,) = base.glob("lib/python*/site-packages/pyphen/dictionaries")
    assert sorted(path.name for path in dictionaries.iterdir()) == [KEPT_DICTIONARY]


def test_every_package_app_and_resource_is_in_the_build_context():
    paths = product_paths()
    assert {
        "console",
        "collectors",
        "history",
        "readtier",
        "inventory",
        "advisor",
        "reports",
        "devenv",
        "templates",
        "static",
    } <= set(paths)
    for name in paths:
        assert (ROOT / name).exists(), f"{name} is declared but not in the repository"
    files = [f for name in paths for f in files_under(name)]
    assert len(files) > 100 and "exports/schemas/audit-export.schema.json" in files
    assert context_misses(files, dockerignore()) == []


def test_a_new_app_would_be_copied_too():
    new_app = [
        "newapp/__init__.py",
        "newapp/apps.py",
        "newapp/migrations/0001_initial.py",
        "newapp/templates/newapp/page.html",
        "newapp/static/newapp/page.css",
    ]
    assert context_misses(new_app, dockerignore()) == []
    # ... and the check sees a product folder left out.
    assert context_misses(new_app + ["reports/models.py"], [*dockerignore(), "newapp", "reports"]) == [
        *new_app,
        "reports/models.py",
    ]


def test_what_is_not_the_product_stays_out():
    kept_out = [
        ".git/HEAD",
        ".venv/bin/python",
        ".env.compose",
        ".run/exports/1/audit.zip",
        ".cache/pg/bin/postgres",
        ".ci/run",
        "tests/settings.py",
        "docs/read-tier.md",
        "bench/env.py",
        "staticfiles/staticfiles.json",
        "pgconsole.egg-info/PKG-INFO",
        "console/__pycache__/urls.cpython-311.pyc",
        "exports/formats/pdf.pyc",
        "node_modules/htmx.org/package.json",
        "static/vendor/node_modules/htmx.org/package.json",
    ]
    assert context_misses(kept_out, dockerignore()) == kept_out


# --- System libraries ---------------------------------------------------------------------------

# debian:bookworm-slim is debuerreotype's build of `debootstrap --variant=minbase`: the packages of
# `Priority: required` and apt, with their dependencies. Read from dpkg's database here (every Debian system
# has the required packages), so the set can only be smaller than the image's: a library it lacks fails.
BASE_IMAGE_ROOTS = ("apt",)
# What python:3.11-slim-bookworm adds, from its Dockerfile (github.com/docker-library/python,
# 3.11/slim-bookworm/Dockerfile): ca-certificates, netbase, tzdata, and the packages of the libraries its own
# build links (it keeps what `ldd` finds for /usr/local, tkinter aside, and purges the rest). libexpat1 is not
# one: Python 3.11 is configured without --with-system-expat, so pyexpat uses its bundled copy.
PYTHON_IMAGE_PACKAGES = (
    *("ca-certificates", "netbase", "tzdata"),
    *("libbz2-1.0", "libc6", "libdb5.3", "libffi8", "libgdbm6", "libgdbm-compat4", "liblzma5", "libncursesw6"),
    *("libreadline8", "libsqlite3-0", "libssl3", "libtinfo6", "libuuid1", "zlib1g"),
)
# Files no package ships but one makes when it is installed (fc-cache, run by fontconfig's trigger).
GENERATED = {"/var/cache/fontconfig/": "fontconfig"}
APT_DEPENDS = [
    *("apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests"),
    *("--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"),
]

# What the app loads at start and when it renders: the settings and every app (django.setup()), what gunicorn
# and the worker import, an audit PDF's text in its own fonts (WeasyPrint: Pango, HarfBuzz, fontconfig) and
# a chart as presentation/charts.py draws it (matplotlib). The document is kept until the maps are read: while a
# font is in use its file stays mapped.
PROBE = """
import json, sys
from datetime import datetime, timedelta, timezone

import django
django.setup()
import console.wsgi
from console.celery import app
app.loader.import_default_modules()
import weasyprint
from django.template.loader import render_to_string
from presentation.charts import Line, chart_png

css = render_to_string("exports/audit.css")
html = (f"<html><head><style>{css}</style></head><body><h1>Audit</h1><p>Planning <b>not tracked</b> "
        "(été, 42 µs)</p><pre>SELECT 1</pre></body></html>")
document = weasyprint.HTML(string=html).render()
pdf = document.write_pdf()
start = datetime(2026, 11, 23, tzinfo=timezone.utc)
png = chart_png([Line("calls/s", [(start, 1.0), (start + timedelta(hours=1), 3.0)])], title="Calls", unit="/s")
assert pdf.startswith(b"%PDF") and png.startswith(b"\\x89PNG"), "nothing was rendered"
mapped = set()
for line in open("/proc/self/maps"):
    fields = line.split(maxsplit=5)
    if len(fields) == 6 and fields[5].startswith("/"):
        mapped.add(fields[5].rstrip("\\n"))
print(json.dumps({"python": [sys.prefix, sys.base_prefix], "mapped": sorted(mapped)}))
"""


def _require(*commands: str) -> None:
    for command in commands:
        if shutil.which(command) is None:
            pytest.fail(
                f"{command} is missing: this check maps the files the app loads to Debian packages, and needs "
                "Debian 12 (the image's release) with dpkg and apt"
            )


@functools.cache
def mapped_files() -> tuple[str, ...]:
    """Every file the app maps once it has rendered, outside the virtualenv (wheels bring their own libraries)
    and the Python installation (the image has its own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LC_")}
    # The image's environment: console.settings in DEBUG (its development keys), and python's LANG.
    env.update(DEBUG="true", DJANGO_SETTINGS_MODULE="console.settings", LANG="C.UTF-8")
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.splitlines()[-1])
    python = tuple(os.path.realpath(p) + "/" for p in probe["python"])
    return tuple(path for path in probe["mapped"] if not os.path.realpath(path).startswith(python))


USR_MERGED = (("/usr/lib/", "/lib/"), ("/usr/lib64/", "/lib64/"), ("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"))


def _usr_merged(path: str) -> str | None:
    """The path under its other name on merged /usr (/lib is /usr/lib): dpkg knows a file by the one its
    package ships."""
    for merged, old in USR_MERGED:
        if path.startswith(merged):
            return old + path[len(merged) :]
        if path.startswith(old):
            return merged + path[len(old) :]
    return None


def _dpkg_search(paths: list[str]) -> dict[str, str]:
    result = subprocess.run(["dpkg-query", "--search", *paths], capture_output=True, text=True)
    owners = {}
    for line in result.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        packages, _, path = line.partition(": ")
        owners[path] = packages.split(", ")[0].split(":")[0]
    return owners


def package_owners(paths: Iterable[str]) -> dict[str, str | None]:
    """path -> the Debian package that ships it (or makes it, GENERATED); None for a file of no package."""
    paths = list(paths)
    owners = _dpkg_search(paths)
    aliases = {_usr_merged(p): p for p in paths if p not in owners and _usr_merged(p)}
    if aliases:
        owners |= {aliases[alias]: package for alias, package in _dpkg_search(list(aliases)).items()}
    for path in paths:
        for prefix, package in GENERATED.items():
            if path not in owners and path.startswith(prefix):
                owners[path] = package
    return {path: owners.get(path) for path in paths}


class DependencyGraph:
    """Debian dependencies (Depends, Pre-Depends) as apt-cache prints them recursively. `--recurse` follows
    every alternative of an OR-dependency (fontconfig-config: fonts-dejavu-core | fonts-liberation | ...);
    apt installs only the first, unless another is already there. `closure` follows apt's choice, so a font
    or a library is counted only where apt would really install it."""

    def __init__(self, text: str):
        # package -> its dependencies, each a group of alternatives, each alternative the packages that would
        # do (one, or the providers of a virtual package).
        self.depends: dict[str, list[list[list[str]]]] = {}
        package: str | None = None
        group: list[list[str]] = []
        alternative: list[str] = []
        for line in text.splitlines():
            if not line.startswith(" "):
                # A virtual package (<name>) is satisfied by its providers, listed where it is depended on.
                package, group = (None if line.startswith("<") else line), []
                if package:
                    self.depends[package] = []
            elif line.startswith("    "):
                alternative.append(line.strip().split(":")[0])  # a provider of the virtual package just named
            elif package:
                kind, _, name = line.strip().partition(": ")
                if kind.lstrip("|") not in ("Depends", "PreDepends"):
                    continue
                if not group:
                    self.depends[package].append(group)
                name = name.split(":")[0]
                alternative = [] if name.startswith("<") else [name]
                group.append(alternative)
                if not kind.startswith("|"):  # `|` joins this alternative with the next one
                    group = []

    def closure(self, roots: Iterable[str], *, installed: Iterable[str] = ()) -> set[str]:
        """The packages apt installs for `roots` on a system that has `installed`."""
        have, out, todo = set(installed), set(), list(roots)
        while todo:
            package = todo.pop()
            if package in out:
                continue
            if package not in self.depends:
                raise KeyError(f"apt-cache does not know {package!r} (a typo, or not in Debian 12?)")
            out.add(package)
            for group in self.depends[package]:
                if not any(name in have or name in out for alternative in group for name in alternative):
                    todo.append(next(alternative[0] for alternative in group if alternative))
        return out


def required_packages() -> list[str]:
    fields = "--showformat=${Package}\t${Priority}\t${db:Status-Abbrev}\n"
    result = subprocess.run(["dpkg-query", "--show", fields], capture_output=True, text=True, check=True)
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    return sorted(name for name, priority, status in rows if priority == "required" and status.startswith("ii"))


@functools.cache
def dependency_graph(roots: tuple[str, ...]) -> DependencyGraph:
    result = subprocess.run([*APT_DEPENDS, *roots], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return DependencyGraph(result.stdout)


def base_image_packages(graph: DependencyGraph) -> set[str]:
    """What python:3.11-slim-bookworm has before the Dockerfile installs anything."""
    return graph.closure([*required_packages(), *BASE_IMAGE_ROOTS, *PYTHON_IMAGE_PACKAGES])


def unprovided(needed: dict[str, list[str]], apt_install: list[str], graph: DependencyGraph) -> dict[str, list[str]]:
    """package -> the files of it the app maps, for each package neither the base image nor the Dockerfile's
    `apt-get install` (with what apt brings along) puts in the image."""
    base = base_image_packages(graph)
    image = base | graph.closure(apt_install, installed=base)
    return {package: files for package, files in needed.items() if package not in image}


@pytest.fixture(scope="module")
def needed() -> dict[str, list[str]]:
    """Debian package -> the files of it the app maps."""
    _require("dpkg-query", "apt-cache")
    owners = package_owners(mapped_files())
    orphans = sorted(path for path, package in owners.items() if package is None)
    assert not orphans, f"mapped files of no Debian package (what puts them in the image?): {orphans}"
    out: dict[str, list[str]] = {}
    for path, package in sorted(owners.items()):
        out.setdefault(package, []).append(path)
    return out


@pytest.fixture(scope="module")
def graph() -> DependencyGraph:
    _require("dpkg-query", "apt-cache")
    roots = {*required_packages(), *BASE_IMAGE_ROOTS, *PYTHON_IMAGE_PACKAGES, *apt_installed(dockerfile())}
    return dependency_graph(tuple(sorted(roots)))


def test_the_image_is_debian_12_and_installs_without_recommends():
    instructions = dockerfile()
    assert instructions[0] == Instruction("FROM", "python:3.11-slim-bookworm")
    assert Path("/etc/debian_version").read_text().startswith("12."), "the library check needs Debian 12"
    installs = [ins.args for ins in instructions if ins.keyword == "RUN" and "apt-get install" in ins.args]
    assert installs, "WeasyPrint's libraries come from Debian"
    for args in installs:
        assert "apt-get update" in args and "--no-install-recommends" in args
        assert "rm -rf /var/lib/apt/lists/*" in args, "the package lists stay out of the layer"


def test_the_app_really_renders_with_system_libraries(needed):
    # What the check below must see, or it proves nothing: Pango and its fonts were loaded.
    assert {"libpango-1.0-0", "libpangoft2-1.0-0", "libfontconfig1", "fonts-dejavu-core"} <= set(needed), needed
    assert any(path.endswith(".ttf") for path in needed["fonts-dejavu-core"])


def test_every_system_library_the_app_loads_is_in_the_image(needed, graph):
    missing = unprovided(needed, apt_installed(dockerfile()), graph)
    assert not missing, "add to the Dockerfile's apt-get install: " + "; ".join(
        f"{package} ({', '.join(files)})" for package, files in sorted(missing.items())
    )


def test_the_check_sees_a_missing_package(needed, graph):
    packages = apt_installed(dockerfile())
    assert "libharfbuzz-subset0" in packages
    without = [p for p in packages if p != "libharfbuzz-subset0"]
    assert set(unprovided(needed, without, graph)) == {"libharfbuzz-subset0"}
    # Pango stays while anything listed depends on it: both go, both are missing (with what only they bring).
    without = [p for p in packages if p not in ("libpango-1.0-0", "libpangoft2-1.0-0")]
    assert {"libpango-1.0-0", "libpangoft2-1.0-0"} <= set(unprovided(needed, without, graph))


def test_the_closure_follows_apt_not_every_alternative():
    graph = DependencyGraph(
        "fontconfig-config\n"
        " |Depends: debconf\n"
        "  Depends: <debconf-2.0>\n"
        "    cdebconf\n"
        "    debconf\n"
        " |Depends: fonts-dejavu-core\n"
        "  Depends: fonts-liberation\n"
        "debconf\n"
        "  PreDepends: perl-base\n"
        "perl-base\n"
        "cdebconf\n"
        "fonts-dejavu-core\n"
        "fonts-liberation\n"
        "<debconf-2.0>\n"
    )
    assert graph.closure(["fontconfig-config"]) == {"fontconfig-config", "debconf", "perl-base", "fonts-dejavu-core"}
    # An alternative already there satisfies the dependency.
    assert graph.closure(["fontconfig-config"], installed={"fonts-liberation", "cdebconf"}) == {"fontconfig-config"}
    with pytest.raises(KeyError, match="libnothing"):
        graph.closure(["libnothing"])


# ---- TLS to monitored servers in the image: verify-full with its user's home and its CA bundle -------------

VERIFY_PROBE = """
import json, os
import django
django.setup()
from django.conf import settings
from collectors.connection_check import server_check
from inventory import tls
from inventory.endpoint import Endpoint

port, pem = int(os.environ["PROBE_PORT"]), open(os.environ["PROBE_CA"]).read()
out = {"ca_dir": str(settings.TLS_CA_DIR), "system": tls.system_roots()}
for name, root in (("pem", pem), ("root.crt", "")):
    endpoint = Endpoint(host="127.0.0.1", port=port, database="app", user="monitor", sslmode="verify-full",
                        ssl_root_cert=root)
    report = server_check(endpoint=endpoint, password="monitor-pw")
    out[name] = next((f.text for f in report.findings if f.topic == "TLS"), report.findings[0].text)
print(json.dumps(out))
"""


def test_verify_full_works_with_the_image_users_home_and_its_ca_bundle(pg_clusters, graph, tmp_path):
    """As in the image: HOME is the user's (ENV HOME), no TLS_CA_DIR nor SSL_CERT_FILE set. A CA given per server
    is written under that home; ~/.postgresql/root.crt there is read; `system` is a bundle the image holds."""
    from devenv import tls as devenv_tls

    home = tmp_path / dockerfile_env(dockerfile())["HOME"].lstrip("/")
    (home / ".postgresql").mkdir(parents=True)
    (home / ".postgresql" / "root.crt").write_text(devenv_tls.ca_pem())
    ca = tmp_path / "ca.pem"
    ca.write_text(devenv_tls.ca_pem())
    env = {k: v for k, v in os.environ.items() if k not in ("TLS_CA_DIR", "SSL_CERT_FILE", "SSL_CERT_DIR")}
    env.update(
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="console.settings",
        HOME=str(home),
        PROBE_PORT=str(pg_clusters[17].port),
        PROBE_CA=str(ca),
    )
    result = subprocess.run(
        [sys.executable, "-c", VERIFY_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["ca_dir"] == str(home / ".cache" / "pgconsole" / "ca")
    verified = "Encrypted (TLSv1.3); the server's certificate is verified against {} for host '127.0.0.1'."
    assert out["pem"] == verified.format("the CA certificate given")
    assert out["root.crt"] == verified.format("~/.postgresql/root.crt")
    assert [p.read_text() for p in Path(out["ca_dir"]).iterdir()] == [devenv_tls.ca_pem()]
    # `system`: the machine's bundle as Python finds it, a file of a package the image has.
    owners = package_owners([out["system"]])
    assert owners[out["system"]] is not None, out["system"]
    assert not unprovided({owners[out["system"]]: [out["system"]]}, apt_installed(dockerfile()), graph)
