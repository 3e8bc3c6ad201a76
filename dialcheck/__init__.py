"""dialcheck: streaming fact-checking for live chat."""
__version__ = "0.1.0"
