"""One error shape for every API error: {"status", "code", "message", "errors"} (field errors by field)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler

from console.api.common import JSONRenderer


def _flatten(detail) -> dict[str, list[str]]:
    """Field errors by top-level field, each a plain message; a nested one (a list field's item, a nested
    serializer's field) says where it is first ("item 1: ...", "max: ..."), never a repr of the structure."""
    if isinstance(detail, dict):
        return {str(k): _messages(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return {"non_field_errors": _messages(detail)}
    return {}


def _messages(detail, where: str = "") -> list[str]:
    if isinstance(detail, dict):
        # DRF keys a list field's items by their index: said from 1, as the items of a nested list are.
        return [
            m
            for k, v in detail.items()
            for m in _messages(v, _joined(where, f"item {k + 1}" if isinstance(k, int) else str(k)))
        ]
    if isinstance(detail, list):
        nested = any(isinstance(v, dict | list) for v in detail)
        return [
            m
            for i, v in enumerate(detail)
            for m in _messages(v, _joined(where, f"item {i + 1}") if nested or isinstance(v, dict | list) else where)
        ]
    return [f"{where}: {detail}" if where else str(detail)]


def _joined(where: str, name: str) -> str:
    return f"{where}, {name}" if where else name


def _message(detail) -> str:
    if isinstance(detail, dict | list):
        first = next(((f, m) for f, m in _flatten(detail).items() if m), None)
        if first is None:
            return "invalid request"
        field, messages = first
        return messages[0] if field == "non_field_errors" else f"{field}: {messages[0]}"
    return str(detail)


def error_body(status_code: int, code: str, message: str, errors: dict | None = None) -> dict:
    """The API's one error shape (for a middleware's JsonResponse too, which DRF does not render)."""
    return {"status": status_code, "code": code, "message": message, "errors": errors or {}}


def error_response(status_code: int, code: str, message: str, errors: dict | None = None, headers=None) -> Response:
    return Response(error_body(status_code, code, message, errors), status=status_code, headers=headers)


def exception_handler(exc, context):
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "not found")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "permission denied")
    response = drf_handler(exc, context)
    if response is None:  # not an API exception: a 500, reported by Django
        return None
    detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
    code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
    if isinstance(code, dict | list):
        code = "invalid" if response.status_code == status.HTTP_400_BAD_REQUEST else "error"
    errors = _flatten(detail) if isinstance(exc, exceptions.ValidationError) else {}
    headers = {k: v for k, v in response.items() if k in ("Retry-After", "WWW-Authenticate", "Allow")}
    request = context.get("request")
    if request is not None and getattr(getattr(request, "accepted_renderer", None), "format", None) == "csv":
        # An error is never a table: it keeps its JSON shape whatever format the table was asked in.
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
    return error_response(response.status_code, str(code), _message(detail), errors, headers)
