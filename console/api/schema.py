"""The OpenAPI schema's shared parts: the one error shape, documented on every operation."""

from drf_spectacular.hooks import postprocess_schema_enums

ERROR = {
    "type": "object",
    "properties": {
        "status": {"type": "integer", "description": "the HTTP status"},
        "code": {"type": "string", "description": "machine-readable: invalid, not_found, throttled, ..."},
        "message": {"type": "string", "description": "what went wrong and what to fix"},
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
            "description": "messages by field (400 only)",
        },
    },
    "required": ["status", "code", "message", "errors"],
}
STATUSES = {
    "400": "invalid request (see errors)",
    "401": "no valid token or session",
    "403": "the caller's role or a read-only token does not allow it",
    "404": "no such object among the caller's organizations",
    "429": "throttled: retry after the Retry-After header's seconds",
}

WRITE_STATUSES = {"409": "the action does not apply to the object's state (e.g. resolving a resolved one)"}


def add_error_responses(result, generator, request, public):
    """Postprocessing hook: every operation may answer each error status with the Error shape."""
    result = postprocess_schema_enums(result, generator, request=request, public=public)
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    ref = {"$ref": "#/components/schemas/Error"}
    for item in result.get("paths", {}).values():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            codes = {**STATUSES, **(WRITE_STATUSES if method != "get" else {})}
            for code, text in codes.items():
                responses.setdefault(code, {"description": text, "content": {"application/json": {"schema": ref}}})
    return result
