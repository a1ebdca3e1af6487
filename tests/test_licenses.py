"""pgconsole's licence and its dependencies' (devenv/licenses.py, make licenses): the rule, where each licence is
read from, the lock and the vendored files as they are, and what the image leaves out to keep the rule."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from email.message import Message
from pathlib import Path

import pytest

from devenv import licenses
from devenv.licenses import Kind
from tests.dockerfile import dockerfile_instructions

ROOT = Path(__file__).resolve().parent.parent


def test_the_project_is_under_the_postgresql_licence_in_its_file_its_pyproject_and_its_installed_metadata():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("PostgreSQL License\n")
    grant = " ".join(text.split())
    assert "Permission to use, copy, modify, and distribute this software and its documentation for any purpose, " in (
        grant
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert (project["license"], project["license-files"]) == ("PostgreSQL", ["LICENSE"])
    assert importlib.metadata.distribution("pgconsole").metadata["License-Expression"] == "PostgreSQL"
    assert licenses.kind_of(licenses.project_license()) is Kind.PERMISSIVE


@pytest.mark.parametrize(
    ("expression", "kind", "terms"),
    [
        ("MIT", Kind.PERMISSIVE, "MIT"),
        ("Apache-2.0 OR BSD-3-Clause", Kind.PERMISSIVE, "Apache-2.0"),
        ("GPL-3.0-only", Kind.STRONG_COPYLEFT, "GPL-3.0-only"),
        ("GPL-2.0-or-later", Kind.STRONG_COPYLEFT, "GPL-2.0-or-later"),
        ("AGPL-3.0-only", Kind.STRONG_COPYLEFT, "AGPL-3.0-only"),
        # A choice takes its best term, a combination its worst.
        ("GPL-2.0-or-later OR MIT", Kind.PERMISSIVE, "MIT"),
        ("MIT AND GPL-3.0-only", Kind.STRONG_COPYLEFT, "MIT AND GPL-3.0-only"),
        ("GPL-2.0-or-later OR LGPL-2.1-or-later OR MPL-1.1", Kind.WEAK_COPYLEFT, "LGPL-2.1-or-later"),
        ("MPL-2.0 AND (Apache-2.0 OR MIT)", Kind.WEAK_COPYLEFT, "MPL-2.0 AND Apache-2.0"),
        ("LGPL-3.0-only", Kind.WEAK_COPYLEFT, "LGPL-3.0-only"),
        ("LicenseRef-Proprietary", Kind.UNKNOWN, "unknown licence LicenseRef-Proprietary"),
        ("Foo-1.0 OR MIT", Kind.PERMISSIVE, "MIT"),
        ("Foo-1.0 AND MIT", Kind.UNKNOWN, "unknown licence Foo-1.0 AND MIT"),
        ("", Kind.UNKNOWN, "no licence declared"),
    ],
)
def test_a_licence_is_judged_by_its_best_choice_and_its_worst_combination(expression, kind, terms):
    assert licenses.judge(expression) == licenses.Verdict(kind, terms)


def test_an_expression_that_does_not_parse_is_unknown_and_says_why():
    verdict = licenses.judge("MIT OR (")
    assert verdict.kind is Kind.UNKNOWN and verdict.terms.startswith("not an SPDX expression")


def _metadata(**fields) -> Message:
    message = Message()
    for name, value in fields.items():
        for one in value if isinstance(value, list) else [value]:
            message[name.replace("_", "-")] = one
    return message


def test_a_licence_is_read_by_hand_then_from_its_expression_then_its_field_then_its_classifiers():
    apache = "License :: OSI Approved :: Apache Software License"
    everything = _metadata(License_Expression="MIT", License="BSD-3-Clause", Classifier=[apache])
    assert licenses.read_expression("x", "1", everything) == ("MIT", "License-Expression")
    assert licenses.read_expression("x", "1", _metadata(License="BSD-3-Clause", Classifier=[apache])) == (
        "BSD-3-Clause",
        "License",
    )
    # A field that is not SPDX (a name, or the whole licence text) gives way to the classifiers, all of them.
    mit = "License :: OSI Approved :: MIT License"
    free_text = _metadata(License="Dual License", Classifier=["License :: OSI Approved", apache, mit])
    assert licenses.read_expression("x", "1", free_text) == ("Apache-2.0 AND MIT", "classifiers")
    assert licenses.read_expression("x", "1", _metadata(License="Copyright (c) 2015\nAll rights reserved")) == (
        "",
        "no License-Expression, SPDX License field or licence classifier",
    )
    # A reading by hand holds for its version only.
    pyphen = _metadata(Classifier=["License :: OSI Approved :: GNU General Public License v2 or later (GPLv2+)"])
    expression, source = licenses.read_expression("pyphen", "0.18.1", pyphen)
    assert expression == "GPL-2.0-or-later OR LGPL-2.1-or-later OR MPL-1.1" and source.startswith("read by hand")
    assert licenses.read_expression("pyphen", "0.19", pyphen) == ("GPL-2.0-or-later", "classifiers")


def test_a_classifier_not_on_the_map_or_a_proprietary_one_is_refused():
    unmapped = _metadata(Classifier=["License :: Freely Distributable"])
    expression, _ = licenses.read_expression("x", "1", unmapped)
    assert licenses.judge(expression).kind is Kind.UNKNOWN
    proprietary = _metadata(Classifier=["License :: Other/Proprietary License"])
    assert licenses.judge(licenses.read_expression("x", "1", proprietary)[0]).kind is Kind.UNKNOWN


class _Dist:
    def __init__(self, version: str, **fields):
        self.version = version
        self.metadata = _metadata(**fields)


def test_the_image_refuses_strong_copyleft_and_the_tests_may_use_it_but_nobody_an_unreadable_licence():
    dists = {
        "gpl-lib": _Dist("1.0", License_Expression="GPL-3.0-only"),
        "gpl-tool": _Dist("2.0", License_Expression="GPL-3.0-only"),
        "mystery-tool": _Dist("3.0", License="see the website"),
        "lgpl-lib": _Dist("4.0", License_Expression="LGPL-3.0-only"),
        "stale": _Dist("5.1", License_Expression="MIT"),
    }

    def distribution(name):
        if name not in dists:
            raise importlib.metadata.PackageNotFoundError(name)
        return dists[name]

    runtime = {"gpl-lib": "1.0", "lgpl-lib": "4.0", "stale": "5.0", "absent": "6.0"}
    dev = {**runtime, "gpl-tool": "2.0", "mystery-tool": "3.0"}
    deps = {d.name: d for d in licenses.dependencies(runtime, dev, distribution)}
    assert deps["gpl-lib"].refused and deps["gpl-lib"].status == (
        "REFUSED: strong copyleft in the image (GPL-3.0-only)"
    )
    assert not deps["gpl-tool"].refused and deps["gpl-tool"].status == "ok (not shipped)"
    assert deps["mystery-tool"].refused and "cannot be read" in deps["mystery-tool"].status
    assert not deps["lgpl-lib"].refused and "shipped unmodified" in deps["lgpl-lib"].status
    # What is installed must be what is locked: another version's licence says nothing of the locked one.
    assert deps["stale"].refused and "5.1 installed, 5.0 locked" in deps["stale"].status
    assert deps["absent"].refused and "not installed here" in deps["absent"].status
    report = licenses.report(deps.values())
    assert re.search(r"^gpl-lib\s+1\.0\s+image\s+GPL-3\.0-only\s+License-Expression\s+REFUSED", report, re.M)
    assert report.splitlines()[-1].endswith("refused: absent, gpl-lib, mystery-tool, stale")


def test_every_locked_and_vendored_dependency_can_ship_with_pgconsole_and_make_licenses_says_so():
    runtime, dev = licenses.image_locked(), licenses.locked(licenses.DEV_LOCK)
    assert len(runtime) > 50 and "pip" in runtime and set(runtime) <= set(dev)
    deps = licenses.dependencies()
    assert [d.name for d in deps if d.refused] == []
    packages = [d for d in deps if d.source != "static/vendor/README.md"]
    assert {d.name for d in packages} == set(dev)
    assert {d.name for d in packages if d.shipped} == set(runtime)
    # The weak copyleft the image ships, each by name: a new one is a decision, not a surprise.
    weak = sorted(d.name for d in deps if d.shipped and d.verdict.kind is Kind.WEAK_COPYLEFT)
    assert weak == ["orjson", "psycopg", "psycopg-binary", "pyphen"]
    # make licenses runs this module; the same table, exit status 0.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "devenv", "licenses"], cwd=ROOT, env=env, capture_output=True)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    assert re.search(r"^psycopg\s+3\.3\.9\s+image\s+LGPL-3\.0-only\s", out, re.M)
    assert (
        out.splitlines()[-1]
        == f"pgconsole: PostgreSQL. {len(deps)} dependencies, {len(runtime) + 2} shipped in the image; none refused"
    )
    assert "\nlicenses: .venv/.installed\n\t$(PYTHON) -m devenv licenses\n" in (ROOT / "Makefile").read_text()


def test_every_reading_by_hand_is_of_a_locked_version():
    dev = licenses.locked(licenses.DEV_LOCK)
    for name, version in licenses.READ_BY_HAND:
        assert dev.get(name) == version, f"{name} {version}: read by hand, but {dev.get(name)} is locked"


# Vendored files: the table's SPDX identifier against the first line of the licence file beside them.
LICENCE_FILE_STARTS = {"0BSD": "Zero-Clause BSD", "MIT": "The MIT License"}


def test_each_vendored_library_has_its_licence_file_and_the_version_the_table_says():
    vendor = licenses.VENDOR_README.parent
    rows = licenses.vendored()
    assert [row[0] for row in rows] == ["htmx", "Chart.js"]
    for library, _version, expression, licence_file in rows:
        assert (vendor / licence_file).read_text().startswith(LICENCE_FILE_STARTS[expression]), library
    assert 'version:"2.0.11"' in (vendor / "htmx" / "htmx.min.js").read_text() and rows[0][1] == "2.0.11"
    assert "Chart.js v4.5.1" in (vendor / "chartjs" / "chart.umd.min.js").read_text()[:100] and rows[1][1] == "4.5.1"


def _gpl_only(header: str) -> bool:
    """A dictionary's header grants the GPL and no lesser or other licence beside it."""
    grants_gpl = re.search(r"terms of the GNU General Public|GNU General Public License,? Version \d", header, re.I)
    other = re.search(r"\bLGPL|\bMPL\b|Mozilla|terms of the GNU Lesser|Lesser General Public License as", header, re.I)
    return bool(grants_gpl) and not other


def test_the_image_deletes_exactly_the_hyphenation_dictionaries_that_are_gpl_alone():
    import pyphen

    folder = Path(pyphen.__file__).parent / "dictionaries"
    headers = {}
    for path in sorted(folder.glob("*.dic")):
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()
        comments = (line.lstrip("%#").strip() for line in lines[:80] if line.startswith(("%", "#")))
        headers[path.name] = " ".join(" ".join(comments).split())
    assert len(headers) >= 40
    assert sorted(name for name, header in headers.items() if _gpl_only(header)) == sorted(
        licenses.PYPHEN_GPL_DICTIONARIES
    )
    # The Dockerfile removes them right after installing the lock (`rm` without -f: a renamed one fails the build).
    step = next(ins.args for ins in dockerfile_instructions((ROOT / "Dockerfile").read_text()) if "pyphen" in ins.args)
    assert "pip install --no-cache-dir --require-hashes --no-deps -r requirements/runtime.txt" in step
    removed = step.split("&& rm ", 1)[1].split()
    assert sorted(removed) == sorted(licenses.PYPHEN_GPL_DICTIONARIES)
