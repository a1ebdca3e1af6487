"""The one error devenv raises about PostgreSQL clusters."""


class ClusterError(RuntimeError):
    """A cluster could not be installed, created, started or stopped."""
