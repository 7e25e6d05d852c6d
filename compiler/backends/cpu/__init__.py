"""CPU backend: C source per schedule, compiled to one shared library."""
