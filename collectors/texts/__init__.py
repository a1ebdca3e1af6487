"""The texts reading: see reading.py."""
