"""collectors/plans/config.py: the plans' settings, declared with the plans, reach settings.PLANS whole, and each is
read by the code it bounds (a setting nothing reads would be a knob that does nothing)."""

import re

from django.conf import settings

from collectors.plans.config import SETTINGS
from tests.test_tree import PRODUCT, ROOT


def test_the_plans_settings_are_settings_plans_whole():
    assert set(settings.PLANS) == {s.key for s in SETTINGS} and {s.group for s in SETTINGS} == {"PLANS"}


def test_each_plans_setting_is_read_by_the_product():
    """Looked for as a key, in the product's modules that take settings.PLANS (some through a local name)."""
    readers = [
        text
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and "settings.PLANS" in (text := path.read_text())
    ]
    unread = [s.key for s in SETTINGS if not any(re.search(rf"\[[\"']{s.key}[\"']\]", text) for text in readers)]
    assert unread == []
