"""The licence of everything pgconsole is built from, against pgconsole's own (pyproject.toml: the PostgreSQL
Licence, a permissive one): every package of the lock files and the front-end libraries of static/vendor/.

What the image ships (requirements/installer.txt and runtime.txt, static/vendor/) must let pgconsole stay
permissively licensed: a permissive licence, or a weak copyleft one (LGPL, MPL) for a library shipped unmodified
as files of its own that a user may replace. A strong copyleft licence (GPL, AGPL) is refused there, as is one
that cannot be read. What only builds and tests pgconsole (requirements/dev.txt alone) is never distributed: it
is listed, and only an unreadable licence fails. A choice (``OR``) takes its best term; a combination (``AND``)
its worst.

A package's licence is read from its installed metadata, in this order: a reading by hand (``READ_BY_HAND``,
for one version: a new version is read again), its ``License-Expression`` (PEP 639), its ``License`` field when
that is an SPDX expression, its licence classifiers (all of them, combined). Identifiers are SPDX's, parsed by
license-expression (the SPDX list it carries).

    python -m devenv licenses      (make licenses)
"""

from __future__ import annotations

import enum
import importlib.metadata
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from license_expression import ExpressionError, LicenseSymbol, get_spdx_licensing

from devenv.locks import parse_lock

ROOT = Path(__file__).resolve().parent.parent
INSTALLER_LOCK = ROOT / "requirements" / "installer.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
DEV_LOCK = ROOT / "requirements" / "dev.txt"
VENDOR_README = ROOT / "static" / "vendor" / "README.md"

LICENSING = get_spdx_licensing()


class Kind(enum.IntEnum):
    """What a licence asks of pgconsole when pgconsole ships the thing, from least to most."""

    PERMISSIVE = 0
    WEAK_COPYLEFT = 1
    STRONG_COPYLEFT = 2
    UNKNOWN = 3


#: Keep the notice; nothing more.
PERMISSIVE = frozenset(
    {
        "0BSD",
        "Apache-2.0",
        "BSD-2-Clause",
        "BSD-3-Clause",
        "CC0-1.0",
        "HPND",
        "ISC",
        "MIT",
        "MIT-0",
        "MIT-CMU",
        "PostgreSQL",
        "PSF-2.0",
        "Python-2.0",
        "Unlicense",
        "Zlib",
        # A classifier that says "BSD License" without the variant: every BSD variant is permissive.
        "LicenseRef-BSD",
    }
)
#: Per file or per library: its own files stay under it (and replaceable); what uses it does not.
WEAK_COPYLEFT = frozenset(
    {"LGPL-2.1-only", "LGPL-2.1-or-later", "LGPL-3.0-only", "LGPL-3.0-or-later", "MPL-1.1", "MPL-2.0"}
)
#: Everything that links with it comes under it: it cannot ship in a permissively licensed image.
STRONG_COPYLEFT = frozenset(
    {
        "AGPL-3.0-only",
        "AGPL-3.0-or-later",
        "GPL-2.0-only",
        "GPL-2.0-or-later",
        "GPL-3.0-only",
        "GPL-3.0-or-later",
        "SSPL-1.0",
    }
)

#: Trove classifiers as SPDX identifiers. "OSI Approved" and "DFSG approved" alone name no licence.
CLASSIFIERS = {
    "License :: OSI Approved :: Apache Software License": "Apache-2.0",
    "License :: OSI Approved :: BSD License": "LicenseRef-BSD",
    "License :: OSI Approved :: GNU Affero General Public License v3": "AGPL-3.0-only",
    "License :: OSI Approved :: GNU General Public License v2 (GPLv2)": "GPL-2.0-only",
    "License :: OSI Approved :: GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
    "License :: OSI Approved :: GNU General Public License v3 (GPLv3)": "GPL-3.0-only",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.1-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0-only",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: Mozilla Public License 1.1 (MPL 1.1)": "MPL-1.1",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "License :: OSI Approved :: Zero-Clause BSD (0BSD)": "0BSD",
    "License :: OSI Approved :: zlib/libpng License": "Zlib",
    "License :: Public Domain": "LicenseRef-Public-Domain",
    "License :: Other/Proprietary License": "LicenseRef-Proprietary",
}
NOT_A_LICENSE = frozenset({"License :: OSI Approved", "License :: DFSG approved"})


@dataclass(frozen=True)
class ReadByHand:
    expression: str
    why: str


#: Packages whose metadata says less or other than their licence files, read by hand for one version each.
READ_BY_HAND: dict[tuple[str, str], ReadByHand] = {
    ("pyphen", "0.18.1"): ReadByHand(
        "GPL-2.0-or-later OR LGPL-2.1-or-later OR MPL-1.1",
        "its LICENSE: 'released under the GPL 2.0+/LGPL 2.1+/MPL 1.1 tri-license' (the classifiers list the three "
        "without saying they are a choice). Four of its hyphenation dictionaries are GPL alone; the image "
        "deletes them (PYPHEN_GPL_DICTIONARIES); pgconsole never hyphenates",
    ),
    ("qrcode", "8.2"): ReadByHand(
        "BSD-3-Clause",
        "its LICENSE is BSD 3-clause (Lincoln Loop); the 'Other/Proprietary License' classifier beside 'BSD "
        "License' names no other terms in the distribution",
    ),
    ("uritemplate", "4.2.0"): ReadByHand(
        "BSD-3-Clause OR Apache-2.0", "its License field, 'BSD 3-Clause OR Apache-2.0', in SPDX's spelling"
    ),
}

#: pyphen's hyphenation dictionaries under the GPL alone (their headers, read by hand for pyphen 0.18.1): the
#: Dockerfile deletes them from the image, so that nothing GPL-only ships. The others are LGPL, MPL or a choice.
PYPHEN_GPL_DICTIONARIES = ("hyph_ca.dic", "hyph_kn_IN.dic", "hyph_ro_RO.dic", "hyph_te_IN.dic")


@dataclass(frozen=True)
class Verdict:
    kind: Kind
    terms: str  # the licence terms that decided (the best of a choice), or why none could be read


@dataclass(frozen=True)
class Dependency:
    name: str
    version: str
    shipped: bool  # in the image (runtime lock, static/vendor) or only building and testing it (dev lock)
    expression: str  # SPDX, or "" when none could be read
    source: str  # where the expression was read
    verdict: Verdict

    @property
    def refused(self) -> bool:
        if self.verdict.kind is Kind.UNKNOWN:
            return True
        return self.shipped and self.verdict.kind is Kind.STRONG_COPYLEFT

    @property
    def status(self) -> str:
        if self.refused:
            why = "cannot be read" if self.verdict.kind is Kind.UNKNOWN else "strong copyleft in the image"
            return f"REFUSED: {why} ({self.verdict.terms})"
        if not self.shipped:
            return "ok (not shipped)" if self.verdict.kind is Kind.STRONG_COPYLEFT else "ok"
        if self.verdict.kind is Kind.WEAK_COPYLEFT:
            return f"ok: {self.verdict.terms}, shipped unmodified as its own files"
        return "ok"


def kind_of(identifier: str) -> Kind:
    if identifier in PERMISSIVE:
        return Kind.PERMISSIVE
    if identifier in WEAK_COPYLEFT:
        return Kind.WEAK_COPYLEFT
    if identifier in STRONG_COPYLEFT:
        return Kind.STRONG_COPYLEFT
    return Kind.UNKNOWN


def judge(expression: str) -> Verdict:
    """What an SPDX expression asks of pgconsole: a choice (OR) its best term, a combination (AND) its worst."""
    if not expression.strip():
        return Verdict(Kind.UNKNOWN, "no licence declared")
    try:
        parsed = LICENSING.parse(expression)
    except ExpressionError as exc:
        return Verdict(Kind.UNKNOWN, f"not an SPDX expression: {exc}")
    return _judge(parsed)


def _judge(node) -> Verdict:
    if isinstance(node, LicenseSymbol):
        kind = kind_of(node.key)
        return Verdict(kind, node.key if kind is not Kind.UNKNOWN else f"unknown licence {node.key}")
    parts = [_judge(arg) for arg in node.args]
    if isinstance(node, LICENSING.OR):
        return min(parts, key=lambda v: v.kind)
    worst = max(parts, key=lambda v: v.kind)
    return Verdict(worst.kind, " AND ".join(p.terms for p in parts))


def _spdx(text: str) -> str | None:
    """The text when it is a valid SPDX expression (every identifier on SPDX's list), else None."""
    if not text or "\n" in text.strip() or len(text) > 200:
        return None
    try:
        LICENSING.parse(text, validate=True, strict=True)
    except ExpressionError:
        return None
    return text.strip()


def read_expression(name: str, version: str, metadata) -> tuple[str, str]:
    """(SPDX expression, where it was read) for an installed distribution's metadata; ("", why) if none."""
    by_hand = READ_BY_HAND.get((name, version))
    if by_hand:
        return by_hand.expression, f"read by hand: {by_hand.why}"
    expression = metadata.get("License-Expression")
    if expression:
        return expression.strip(), "License-Expression"
    field = _spdx(metadata.get("License") or "")
    if field:
        return field, "License"
    classifiers = [c for c in metadata.get_all("Classifier") or [] if c.startswith("License ::")]
    ids = []
    for classifier in classifiers:
        if classifier in NOT_A_LICENSE:
            continue
        ids.append(CLASSIFIERS.get(classifier, f"LicenseRef-unmapped-classifier-{len(ids)}"))
    if ids:
        return " AND ".join(dict.fromkeys(ids)), "classifiers"
    return "", "no License-Expression, SPDX License field or licence classifier"


def locked(path: Path) -> dict[str, str]:
    """{canonical name: version} of a lock file."""
    return {name: pin.version for name, pin in parse_lock(path.read_text()).pins.items()}


def image_locked() -> dict[str, str]:
    """What the image installs from the locks: the installer (pip, which stays in it), then the runtime lock."""
    return locked(INSTALLER_LOCK) | locked(RUNTIME_LOCK)


def vendored(readme: Path = VENDOR_README) -> list[tuple[str, str, str, str]]:
    """(library, version, SPDX licence, licence file) from static/vendor/README.md's table."""
    rows = []
    for line in readme.read_text().splitlines():
        if not line.startswith("|"):
            continue
        library, version, _file, expression, license_file, *_ = (c.strip() for c in line.strip("|").split("|"))
        if library != "library" and set(library) != {"-"}:
            rows.append((library, version, expression, license_file))
    return rows


def dependencies(
    runtime: dict[str, str] | None = None,
    dev: dict[str, str] | None = None,
    distribution=importlib.metadata.distribution,
) -> list[Dependency]:
    """Every locked package (read from this environment: make install put exactly the lock there) and every
    vendored library, with its licence and verdict. A locked package missing here is unknown."""
    runtime = image_locked() if runtime is None else runtime
    dev = locked(DEV_LOCK) if dev is None else dev
    out = []
    for name in sorted(set(runtime) | set(dev)):
        version = runtime.get(name) or dev[name]
        try:
            dist = distribution(name)
        except importlib.metadata.PackageNotFoundError:
            expression, source = "", "not installed here (make install)"
        else:
            if dist.version != version:
                expression, source = "", f"{dist.version} installed, {version} locked (make install)"
            else:
                expression, source = read_expression(name, version, dist.metadata)
        verdict = judge(expression) if expression else Verdict(Kind.UNKNOWN, source)
        out.append(Dependency(name, version, name in runtime, expression, source, verdict))
    for library, version, expression, _file in vendored():
        out.append(Dependency(library, version, True, expression, "static/vendor/README.md", judge(expression)))
    return out


def project_license() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]


def report(deps: Iterable[Dependency]) -> str:
    deps = list(deps)
    rows = [("package", "version", "where", "licence", "read from", "verdict")]
    for d in deps:
        source = "read by hand" if d.source.startswith("read by hand") else d.source
        rows.append((d.name, d.version, "image" if d.shipped else "dev", d.expression or "-", source, d.status))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:5], widths, strict=True)) + "  " + r[5] for r in rows]
    refused = [d for d in deps if d.refused]
    shipped = sum(d.shipped for d in deps)
    lines.append("")
    lines.append(
        f"pgconsole: {project_license()}. {len(deps)} dependencies, {shipped} shipped in the image; "
        + (f"{len(refused)} refused: {', '.join(d.name for d in refused)}" if refused else "none refused")
    )
    return "\n".join(lines)


def main() -> int:
    deps = dependencies()
    print(report(deps))
    return 1 if any(d.refused for d in deps) else 0
