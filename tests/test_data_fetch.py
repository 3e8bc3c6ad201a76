"""`dialcheck data fetch | list` against a real local HTTP server (http.server on 127.0.0.1, a free
port) serving copies of the real data files (from ../shared/data, copied into a temp dir; nothing
of it is committed): a fetch verifies every file against the committed manifest; a tampered file
is refused in one line with exit 2 and leaves neither the file nor a temp file behind; `data list`
says present / missing / corrupt per set."""
from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import socket
import threading
from pathlib import Path

import pytest

from dialcheck.cli import main
from dialcheck.commands.data import MANIFEST, Manifest
from schemas.settings import SHARED_DATA_DIR

pytestmark = pytest.mark.unit

DIALFACT = [f["path"] for f in Manifest.load().files_of(["dialfact"])]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *a):  # the server's own access log is not what is tested
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        super().do_GET()


@pytest.fixture
def served(tmp_path):
    """(base URL, served dir): a real HTTP server whose tree mirrors a data dir."""
    if not all((SHARED_DATA_DIR / p).is_file() for p in DIALFACT):
        pytest.skip(f"needs the real DialFact files in {SHARED_DATA_DIR} to serve copies of")
    root = tmp_path / "mirror"
    for rel in DIALFACT:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DATA_DIR / rel, root / rel)
    handler = type("H", (_Quiet,), {"requests": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", root, handler
    srv.shutdown()
    srv.server_close()


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _leftovers(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_fetch_downloads_verifies_and_skips_what_is_present(served, tmp_path, capsys):
    url, _, handler = served
    target = tmp_path / "data"
    assert main(["data", "fetch", "dialfact", "--base-url", url, "--dir", str(target)]) == 0
    wanted = {f["path"]: f["sha256"] for f in Manifest.load().files_of(["dialfact"])}
    assert {p: _sha(target / p) for p in wanted} == wanted
    assert _leftovers(target) == sorted(wanted)  # no temp file left
    assert len(handler.requests) == len(wanted)
    out = capsys.readouterr().out
    assert out.count("sha256 ok") == len(wanted), out
    # a second fetch finds every file verified and downloads nothing
    assert main(["data", "fetch", "dialfact", "--base-url", url, "--dir", str(target)]) == 0
    assert len(handler.requests) == len(wanted)
    assert "0 fetched, 3 already present" in capsys.readouterr().out


def test_wrong_checksum_is_refused_in_one_line_and_nothing_is_left(served, tmp_path, capsys):
    url, root, _ = served
    sample = root / "dialfact" / "testsmall.jsonl"
    raw = bytearray(sample.read_bytes())
    raw[100] = ord("X") if raw[100] != ord("X") else ord("Y")  # same size, one byte changed
    sample.write_bytes(bytes(raw))
    target = tmp_path / "data"
    assert main(["data", "fetch", "dialfact", "--base-url", url, "--dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dialcheck: refused dialfact/testsmall.jsonl: "), err
    assert "Traceback" not in err
    assert not (target / "dialfact" / "testsmall.jsonl").exists()
    assert not [p for p in _leftovers(target) if p.endswith(".part")], _leftovers(target)


def test_a_larger_file_is_refused_too(served, tmp_path, capsys):
    url, root, _ = served
    (root / "dialfact" / "LICENSE.txt").write_bytes((root / "dialfact" / "LICENSE.txt").read_bytes() + b"more")
    target = tmp_path / "data"
    assert main(["data", "fetch", "dialfact", "--base-url", url, "--dir", str(target)]) == 2
    assert "larger than the 1507 bytes" in capsys.readouterr().err
    assert _leftovers(target) == []


def test_unreachable_source_is_one_line(tmp_path, capsys):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["data", "fetch", "wice", "--base-url", f"http://127.0.0.1:{port}", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dialcheck: could not download wice/") and err.count("\n") == 1, err
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("args, want", [
    (["nosuchset"], "dialcheck: unknown data set nosuchset: choose from dialfact, "),
    (["hybridial"], "dialcheck: hybridial cannot be fetched: derived here from FineDialFact"),
])
def test_set_mistakes_are_one_line(args, want, tmp_path, capsys):
    assert main(["data", "fetch", *args, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(want) and err.count("\n") == 1, err


def test_list_says_present_missing_and_corrupt(served, tmp_path, capsys):
    url, _, _ = served
    target = tmp_path / "data"
    assert main(["data", "fetch", "dialfact", "--base-url", url, "--dir", str(target)]) == 0
    capsys.readouterr()
    assert main(["data", "list", "--dir", str(target), "--json"]) == 0
    rows = {r["set"]: r for r in json.loads(capsys.readouterr().out)["sets"]}
    assert rows["dialfact"]["state"] == "present" and rows["foolmetwice"]["state"] == "missing"
    (target / "dialfact" / "true_dialfact_valid.csv").write_text("label\n1\n")
    (target / "wice").mkdir()
    shutil.copyfile(SHARED_DATA_DIR / "wice" / "LICENSE.md", target / "wice" / "LICENSE.md")
    assert main(["data", "list", "--dir", str(target)]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()[1:]}
    assert "corrupt" in lines["dialfact"] and "dialfact/true_dialfact_valid.csv corrupt" in lines["dialfact"]
    assert lines["wice"].split()[1] == "partial" and "dialcheck data fetch wice" in lines["wice"]
    assert lines["hybridial"].split()[1] == "missing" and "not fetchable" in lines["hybridial"]


def test_manifest_entries_are_complete():
    """Every entry names its set, a pinned source (or why it has none), a sha256, a size and a licence."""
    raw = json.loads(MANIFEST.read_text())
    for f in raw["files"]:
        assert f["set"] in raw["sets"] and len(f["sha256"]) == 64 and f["size"] > 0 and f["license"], f
        if f["url"] is None:
            assert raw["sets"][f["set"]].get("not_fetchable"), f
        else:
            assert f["url"].startswith("https://raw.githubusercontent.com/") and len(f["url"].split("/")[5]) == 40, f


def test_missing_data_is_one_line_naming_the_fetch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DIALCHECK_DATA_DIR", str(tmp_path))
    assert main(["eval", "--protocol", "fv", "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert err == (f"dialcheck: DialFact data not found (looked in {tmp_path} (DIALCHECK_DATA_DIR)): "
                   "run `dialcheck data fetch dialfact` or set DIALCHECK_DATA_DIR\n")


@pytest.fixture
def own_mirror(tmp_path):
    """A real HTTP server with two small files of our own and a manifest naming them: ensure_data's
    behaviour needs no real data set."""
    root = tmp_path / "own-mirror"
    files = {"tiny/a.jsonl": b'{"x": 1}\n' * 50, "tiny/LICENSE.txt": b"test licence\n"}
    entries = []
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(body)
        entries.append({"set": "tiny", "path": rel, "url": "http://127.0.0.1:9/never", "size": len(body),
                        "sha256": hashlib.sha256(body).hexdigest()})
    manifest_path = tmp_path / "manifest.json"
    manifest_path.write_text(json.dumps({"sets": {"tiny": {"title": "Tiny"}}, "files": entries}))
    handler = type("H", (_Quiet,), {"requests": []})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", Manifest.load(manifest_path), handler
    srv.shutdown()
    srv.server_close()


def test_ensure_data_fetches_a_missing_set_once_and_says_what_and_from_where(own_mirror, tmp_path, monkeypatch):
    import io

    from dialcheck.commands.data import ensure_data
    from schemas.settings import load_settings

    base, manifest, handler = own_mirror
    data = tmp_path / "data"
    monkeypatch.setenv("DIALCHECK_DATA_DIR", str(data))
    monkeypatch.setenv("DIALCHECK_DATA_BASE_URL", base)
    out = io.StringIO()
    ensure_data(load_settings(), ["tiny/a.jsonl"], who="demo", out=out, manifest=manifest)
    first = out.getvalue().splitlines()[0]
    assert first == (f"demo: Tiny data not found; fetching 2 files (0.0 MB) from {base} into {data} "
                     "(once; DIALCHECK_DATA_BASE_URL for a mirror)"), out.getvalue()
    assert (data / "tiny" / "a.jsonl").read_bytes() == b'{"x": 1}\n' * 50 and (data / "tiny" / "LICENSE.txt").is_file()
    assert sorted(handler.requests) == ["/tiny/LICENSE.txt", "/tiny/a.jsonl"]
    again = io.StringIO()
    ensure_data(load_settings(), ["tiny/a.jsonl"], who="demo", out=again, manifest=manifest)
    assert again.getvalue() == "" and len(handler.requests) == 2  # present: nothing fetched, nothing said


def test_ensure_data_offline_is_the_fetch_line_alone(own_mirror, tmp_path, monkeypatch):
    import io

    from dialcheck.commands.data import DataError, ensure_data
    from schemas.settings import load_settings

    _, manifest, _ = own_mirror
    data = tmp_path / "data"
    monkeypatch.setenv("DIALCHECK_DATA_DIR", str(data))
    monkeypatch.delenv("DIALCHECK_DATA_BASE_URL", raising=False)
    out = io.StringIO()
    with pytest.raises(DataError) as e:  # the manifest's own URL: port 9 on loopback, nothing listens
        ensure_data(load_settings(), ["tiny/a.jsonl"], who="demo", out=out, manifest=manifest)
    assert out.getvalue() == "" and "offline? set DIALCHECK_DATA_BASE_URL" in str(e.value) and "\n" not in str(e.value)
    assert not [p for p in data.rglob("*") if p.is_file()]
