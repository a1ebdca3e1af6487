"""The REST API (/api/v1/): DRF views over the same selectors and services as the console's pages."""
