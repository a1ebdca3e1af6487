"""(being built) Top statements of a server and of an organization."""

urlpatterns: list = []
