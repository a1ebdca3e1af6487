"""GET /api/v1/organizations/: the organizations the caller belongs to, with their role."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from accounts.access import role_in, visible_organizations
from console.api.common import TABLE_RENDERERS, page_of, page_schema


class OrganizationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=["viewer", "dba", "admin"], help_text="the caller's role (superuser: admin)")
    servers = serializers.IntegerField(help_text="servers of the organization")


PagedOrganizations = page_schema(OrganizationSerializer, "PagedOrganizations")


class Organizations(APIView):
    renderer_classes = TABLE_RENDERERS

    @extend_schema(responses=PagedOrganizations, operation_id="organizations_list")
    def get(self, request):
        from django.db.models import Count

        orgs = visible_organizations(request.user).annotate(server_count=Count("servers", distinct=True))
        rows = [
            {"id": o.pk, "name": o.name, "role": role_in(request.user, o.pk), "servers": o.server_count}
            for o in orgs.order_by("name")
        ]
        return page_of(OrganizationSerializer(rows, many=True).data, request)
