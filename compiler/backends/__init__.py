"""Backends turn a schedule into code for one kind of device.  Today: `cpu` (C)."""
