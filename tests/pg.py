"""A real PostgreSQL server for the tests: Debian's `postgresql` package (infra/setup.sh installs it),
`initdb` in a temporary directory, `pg_ctl` on a free loopback port, password authentication over
TCP (scram-sha-256), one fresh database per test.

Why our own and not pytest-postgresql's process fixture: CI runs as root and `initdb`/`pg_ctl`
refuse to; as root the server runs as the package's `postgres` user (subprocess `user=`), as
anyone else as that user. The password holds '@', ':' and '%' so that the URL's percent-encoding is
exercised and a leak of it is easy to find. fsync is off: the tests kill workers, never the machine."""
from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

PG_BIN_ENV = "DIALCHECK_TEST_PG_BIN"  # a directory holding initdb and pg_ctl, when not Debian's
SUPERUSER = "dialcheck"


def pg_bin() -> Path:
    """The newest server binaries: $DIALCHECK_TEST_PG_BIN, pg_ctl on PATH, else /usr/lib/postgresql/*/bin."""
    if os.environ.get(PG_BIN_ENV):
        return Path(os.environ[PG_BIN_ENV])
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent  # a link (e.g. in /usr/local/bin): the real bin directory
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found: run infra/setup.sh as root (apt-get install "
                           f"postgresql) or set {PG_BIN_ENV}")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One server: `start()`, `stop()` (fast: clients disconnected, as in an outage), `database()`
    for a fresh database's URL, `close()` stops it and removes its directory."""

    def __init__(self):
        self.bin = pg_bin()
        self.as_user = None
        if os.geteuid() == 0:  # initdb and pg_ctl refuse root: run them as the package's user
            try:
                self.as_user = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and no 'postgres' user to run PostgreSQL as "
                                   "(apt-get install postgresql creates it)") from None
        self.root = Path(tempfile.mkdtemp(prefix="dialcheck-pg-"))  # /tmp: reachable by the postgres user
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.password = f"pg-p@ss:{secrets.token_hex(6)}%"
        self.port = free_port()
        self._databases = 0
        try:
            pwfile = self.root / "pw"
            pwfile.write_text(self.password + "\n")
            if self.as_user:
                for p in (self.root, pwfile):
                    os.chown(p, self.as_user.pw_uid, self.as_user.pw_gid)
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, f"--pwfile={pwfile}", "--auth-local=trust",
                      "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
            pwfile.unlink()
            self.start()
        except BaseException:
            self.close()
            raise

    def _run(self, tool: str, *args: str) -> None:
        kw = {"user": self.as_user.pw_uid, "group": self.as_user.pw_gid, "extra_groups": []} if self.as_user else {}
        r = subprocess.run([str(self.bin / tool), *args], cwd=self.root, capture_output=True, text=True,
                           timeout=120, **kw)
        if r.returncode:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({r.returncode}): {r.stderr.strip()[-2000:]}\n{log}")

    def start(self) -> None:
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c shared_buffers=32MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def url(self, dbname: str = "postgres", password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{SUPERUSER}:{quote(pw, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def database(self) -> str:
        """A new, empty database; its URL (with the password)."""
        import psycopg

        self._databases += 1
        name = f"test_{os.getpid()}_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "PostgresServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
