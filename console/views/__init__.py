"""The console's pages: one module per page (or group of pages), thin views that parse the request,
call selectors or services, and render one template (its named fragment for htmx requests)."""
