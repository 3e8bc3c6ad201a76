"""The registered decision checks, one module each (registry.py imports every module here)."""
