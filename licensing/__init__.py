"""Licensing: signed license files, activation and entitlements (the licensing issue)."""
