"""What the console's pages and its API send as a file download."""

from __future__ import annotations

from django.http import HttpResponse

from exports.services import ExportFile


def zip_response(found: ExportFile) -> HttpResponse:
    """A built export as the console and the API send it: an attachment with its checksum in a header."""
    response = HttpResponse(found.data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{found.name}"'
    response["X-Checksum-SHA256"] = found.sha256
    return response
