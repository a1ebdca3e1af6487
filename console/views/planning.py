"""(being built)"""

urlpatterns: list = []
