"""{% collection_error code message %}: a failed collection as the page's reader may see it (collectors.errors:
libpq's words and addresses for console staff, the console's own sentence for everyone else);
{% database_error code message %}: a database the schema reading left unread, likewise."""

from django import template

from accounts.access import sees_connection_detail
from collectors.public import database_error as database_error_shown
from collectors.public import shown

register = template.Library()


@register.simple_tag(takes_context=True)
def collection_error(context, code: str, message: str) -> str:
    request = context.get("request")
    return shown(code, message, detail=request is not None and sees_connection_detail(request.user))


@register.simple_tag(takes_context=True)
def database_error(context, code: str, message: str) -> str:
    request = context.get("request")
    return database_error_shown(code, message, detail=request is not None and sees_connection_detail(request.user))
