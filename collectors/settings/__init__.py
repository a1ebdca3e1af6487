"""The settings reading: see reading.py."""
