"""Plans of normalized statements, read from monitored servers (issue 37): what can be explained, and how."""
