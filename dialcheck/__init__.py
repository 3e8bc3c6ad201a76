"""dialcheck: streaming fact-checking for live chat.

The Python API (docs/integration.md, "Python"): `from dialcheck import Checker`. The names in
`__all__` are the public ones; everything else may change. Importing this package loads no model
and no heavy library: `Checker` is imported on first use."""
__version__ = "0.1.0"
__all__ = ["Checker", "InvalidInput", "Verdict"]


def __getattr__(name: str):
    if name in ("Checker", "InvalidInput"):
        from dialcheck import python_api

        return getattr(python_api, name)
    if name == "Verdict":
        from schemas.verdict import Verdict

        return Verdict
    raise AttributeError(f"module 'dialcheck' has no attribute {name!r}")
