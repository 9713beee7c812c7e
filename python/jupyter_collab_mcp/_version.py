# Replaced by build_wheel.py with the version being built.
__version__ = "0.0.0.dev0"
