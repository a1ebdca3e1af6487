"""Who monitors what: organizations, their members and their servers (with the credentials to reach
them). The bottom layer: it imports neither the collectors nor the console."""
