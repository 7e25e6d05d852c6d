"""The compiler: frontends -> IR -> (search -> schedule -> backends -> artifact) -> runtime."""
