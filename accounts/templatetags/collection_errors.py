"""{% collection_error code message %}: a failed collection as the page's reader may see it (readings.errors:
libpq's words and addresses for console staff, the console's own sentence for everyone else)."""

from django import template

from accounts.access import sees_connection_detail
from readings.public import shown

register = template.Library()


@register.simple_tag(takes_context=True)
def collection_error(context, code: str, message: str) -> str:
    request = context.get("request")
    return shown(code, message, detail=request is not None and sees_connection_detail(request.user))
