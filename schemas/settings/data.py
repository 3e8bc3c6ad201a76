"""Where the data lives: the shared data dir, or the fetch dir `dialcheck data fetch` writes."""
from __future__ import annotations

from pathlib import Path

from pydantic import field_validator

from schemas.settings.base import ENV_PREFIX, REPO_ROOT, Section, env


SHARED_DATA_DIR = REPO_ROOT.parent / "shared" / "data"


def user_data_dir(home: str = "") -> Path:
    """Where `dialcheck data fetch` writes when DIALCHECK_DATA_DIR is not set: DIALCHECK_DATA_HOME,
    else $XDG_DATA_HOME/dialcheck/data, else ~/.local/share/dialcheck/data."""
    import os

    if home:
        return Path(home).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dialcheck" / "data"


class DataSettings(Section):
    home: str = env("DATA_HOME", "", "Where `dialcheck data fetch` writes when DIALCHECK_DATA_DIR is not set "
                     "(empty: $XDG_DATA_HOME/dialcheck/data, else ~/.local/share/dialcheck/data).")
    dir: str = env("DATA_DIR", "",
                    "Root of the data (DialFact, NLI sets, FoolMeTwice, WiCE). Empty: ../shared/data beside the "
                    "repository when it exists, else the fetch dir (DIALCHECK_DATA_HOME; `dialcheck data fetch`).",
                    validate_default=True)

    @field_validator("dir")
    @classmethod
    def _resolve_dir(cls, v: str, info) -> str:
        if v:
            return v
        return str(SHARED_DATA_DIR) if SHARED_DATA_DIR.is_dir() else str(user_data_dir(info.data.get("home", "")))

    def looked_in(self) -> tuple[str, ...]:
        """The data dirs tried, in order, as a user would set them (for 'data not found' lines)."""
        import os

        if os.environ.get(ENV_PREFIX + "DATA_DIR"):
            return (f"{self.dir} (DIALCHECK_DATA_DIR)",)
        if self.dir not in (str(SHARED_DATA_DIR), str(self.fetch_dir)):  # a --data-dir option
            return (self.dir,)
        return (str(SHARED_DATA_DIR), f"{self.fetch_dir} (DIALCHECK_DATA_HOME)")

    @property
    def fetch_dir(self) -> Path:
        """Where `dialcheck data fetch` writes: DIALCHECK_DATA_DIR when set, else the user data dir."""
        import os

        return Path(self.dir) if os.environ.get(ENV_PREFIX + "DATA_DIR") else user_data_dir(self.home)

    @property
    def dialfact_sample(self) -> str:
        """The DialFact JSONL that eval, replay, demo, benchmarks and tests default to."""
        return str(Path(self.dir) / "dialfact" / "testsmall.jsonl")
