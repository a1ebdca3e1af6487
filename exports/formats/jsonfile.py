"""audit.json: the document as exports.audit_data builds it, and its JSON Schema beside it."""

from __future__ import annotations

import json
import math

from exports.audit_data import SCHEMA_PATH


def _finite(value):
    """NaN and infinities are not JSON: an unmeasured point is null, as everywhere else."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def json_bytes(doc: dict) -> bytes:
    return (json.dumps(_finite(doc), indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def schema_bytes() -> bytes:
    return SCHEMA_PATH.read_bytes()
