"""The statements reading: see reading.py."""
