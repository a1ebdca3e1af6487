"""The waits reading: see reading.py."""
