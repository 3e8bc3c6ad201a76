"""One scrubber (schemas/secrets.py) for everything dialcheck writes: a credential planted in every
URL-like setting (passwords with '@', ':' and spaces) never shows in `dialcheck config`, in the
verdict and error lines of `dialcheck check`, in an `eval --output` run file, or in log lines; and
users' chat text is never rewritten, even when it contains a secret's value.

`check` and `eval` run the real pipeline against an OpenSearch URL where nothing listens (port 9
on loopback), the outage that once leaked the password into the status reason."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import pytest

from schemas import Evidence, Status, Surface, Verdict
from schemas.secrets import Scrubber, ScrubbingFilter, install_record_scrubber, mask_urls
from schemas.settings import REPO_ROOT, SECTIONS, load_settings

# one planted password per URL-like setting; each holds a character a naive `[^/@\s]+` stops at
PLANTED = {
    "DIALCHECK_OPENSEARCH_URL": ("http://admin:{pw}@127.0.0.1:9", "Os-p@ss w:rd-1"),
    "DIALCHECK_MODELS": ("triton://user:{pw}@127.0.0.1:9", "Tr1ton-p@ss:2"),
    "DIALCHECK_KAFKA_BOOTSTRAP": ("kafka://ku:{pw}@127.0.0.1:9", "K@fka-pass-3"),
    "DIALCHECK_LLM_URL": ("http://lu:{pw}@127.0.0.1:9/v1", "Llm-p@ss-4"),
    "DIALCHECK_FEEDBACK_STORE": ("postgresql://fu:{pw}@127.0.0.1:9/dialcheck", "Fb-p@ss-7"),
}
SECRET_VALUES = {"DIALCHECK_KAFKA_SASL_PASSWORD": "Sasl-secret-5", "DIALCHECK_LLM_API_KEY": "sk-planted-key-6"}
# the part of each password that a half-masking scrubber leaves visible (after the first '@')
FRAGMENTS = [pw for _, pw in PLANTED.values()] + [pw.split("@")[-1] for _, pw in PLANTED.values()] + \
    list(SECRET_VALUES.values())


def planted_env(**extra: str) -> dict[str, str]:
    env = {var: tpl.format(pw=pw) for var, (tpl, pw) in PLANTED.items()}
    return {**os.environ, **env, **SECRET_VALUES, **extra,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))}


def leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


def dialcheck(args: list[str], env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dialcheck.cli", *args], cwd=str(REPO_ROOT), env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.unit
def test_every_url_like_setting_is_planted():
    """A URL setting added later must join PLANTED (else its secret is untested)."""
    url_like = {info.validation_alias.choices[0] for section in SECTIONS.values()
                for name, info in section.model_fields.items()
                if info.annotation is str and ("url" in name or "bootstrap" in name or "://" in (info.description or ""))}
    assert url_like <= PLANTED.keys(), url_like - PLANTED.keys()
    secret = {info.validation_alias.choices[0] for section in SECTIONS.values()
              for info in section.model_fields.values() if "SecretStr" in str(info.annotation)}
    assert secret <= SECRET_VALUES.keys(), secret - SECRET_VALUES.keys()


@pytest.mark.unit
@pytest.mark.parametrize("text,want", [
    ("https://admin:pa@ss@os:9200/x", "https://***@os:9200/x"),           # '@' in the password
    ("triton://u:p:a:ss@h:8001", "triton://***@h:8001"),                  # ':' in the password
    ("opensearch http://admin:my pass word@127.0.0.1:9/idx: refused", "opensearch http://***@127.0.0.1:9/idx: refused"),
    ("kafka://u:p@h1:9092,kafka://v:q@h2:9092", "kafka://***@h1:9092,kafka://***@h2:9092"),
    ("'https://admin:x@y@host:1' failed", "'https://***@host:1' failed"),
    ("no url: mail bob@example.com", "no url: mail bob@example.com"),
    ("http://127.0.0.1:9200/idx", "http://127.0.0.1:9200/idx"),
])
def test_mask_urls_masks_the_whole_userinfo(text, want):
    assert mask_urls(text) == want


@pytest.mark.unit
def test_scrubber_from_settings_knows_every_planted_secret(monkeypatch):
    for var, value in planted_env().items():
        if var.startswith("DIALCHECK_"):
            monkeypatch.setenv(var, value)
    scrub = Scrubber.from_settings(load_settings())
    known = {info.validation_alias.choices[0] for section in SECTIONS.values() for info in section.model_fields.values()}
    planted = [pw for var, (_, pw) in PLANTED.items() if var in known] + \
        [pw for var, pw in SECRET_VALUES.items() if var in known]
    assert len(planted) >= 4
    text = " ".join(f"pw={pw}" for pw in planted)  # bare values, not inside URLs: the literal rule
    assert not [pw for pw in planted if pw in scrub(text) or pw.split("@")[-1] in scrub(text)], scrub(text)


@pytest.mark.unit
def test_verdict_scrubs_what_dialcheck_wrote_never_the_users_text():
    """The reason and model_versions are dialcheck's; claim, surface, evidence and rationale are
    users' text and passages: a chat turn that says the password keeps it (no 'password is ***')."""
    from streams.checking import safe_verdict

    pw = "hunter22-planted"
    said = f"my password is {pw}"
    v = Verdict("c", "t", "id", said, Surface("r0", said), "NOT ENOUGH INFO",
                {"SUPPORTS": 0.0, "REFUTES": 0.0, "NOT ENOUGH INFO": 1.0}, [Evidence("p", "T", f"text {pw}", said)],
                {"search": f"opensearch http://a:{pw}@h:1"}, {}, Status("degraded", f"search http://a:{pw}@h:1 failed ({pw})"),
                rationale={"summary": said})
    out = safe_verdict(v, Scrubber([pw]), 1024)
    assert pw not in out.status.reason and "http://***@h:1" in out.status.reason
    assert pw not in json.dumps(out.model_versions)
    assert out.claim == said and out.surface.text == said and out.rationale["summary"] == said
    assert out.evidence[0].text == f"text {pw}" and out.evidence[0].window == said


@pytest.mark.unit
def test_config_masks_every_url_setting():
    out = dialcheck(["config"], planted_env(), timeout=120)
    js = dialcheck(["config", "--json"], planted_env(), timeout=120)
    assert out.returncode == 0 and js.returncode == 0, out.stderr + js.stderr
    assert not leaks(out.stdout + out.stderr + js.stdout + js.stderr)
    shown = json.loads(js.stdout)
    assert shown["retrieval.opensearch_url"] == "http://***@127.0.0.1:9"
    assert shown["models.backend"] == "triton://***@127.0.0.1:9"
    assert shown["kafka.bootstrap"] == "kafka://***@127.0.0.1:9"


@pytest.mark.unit
def test_error_line_masks_the_broker_credentials():
    out = dialcheck(["verdicts", "--broker", "kafka://ku:K@fka-pass-3@127.0.0.1:9"],
                    planted_env(DIALCHECK_BROKER_WAIT_S="1"), timeout=120)
    from dialcheck.errors import UNREACHABLE

    assert out.returncode == UNREACHABLE and out.stderr.startswith("dialcheck: no Kafka broker answers at kafka://***@127.0.0.1:9")
    assert not leaks(out.stdout + out.stderr)


@pytest.mark.unit
def test_log_records_are_scrubbed_for_every_handler():
    """The CLI's record scrubber: message, arguments and traceback, whichever handler prints them."""
    buf = io.StringIO()
    log = logging.getLogger("dialcheck.test_secrets")
    handler = logging.StreamHandler(buf)
    log.addHandler(handler)
    from schemas import secrets

    old, old_state = logging.getLogRecordFactory(), dict(secrets._factory_state)
    try:
        install_record_scrubber(Scrubber(["Sasl-secret-5"]))
        try:
            raise ConnectionError("connect http://admin:Os-p@ss w:rd-1@127.0.0.1:9/x refused")
        except ConnectionError:
            log.error("backend %s failed (sasl %s)", "http://admin:Os-p@ss w:rd-1@127.0.0.1:9", "Sasl-secret-5",
                      exc_info=True)
    finally:  # as before (the CLI's main(), run in this process by other tests, may have installed one)
        logging.setLogRecordFactory(old)
        log.removeHandler(handler)
        secrets._factory_state.clear()
        secrets._factory_state.update(old_state)
    text = buf.getvalue()
    assert "backend http://***@127.0.0.1:9 failed (sasl ***)" in text and "ConnectionError: connect http://***@" in text
    assert not leaks(text)
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "pw %s", ("Tr1ton-p@ss:2",), None)
    assert ScrubbingFilter(Scrubber(["Tr1ton-p@ss:2"])).filter(rec) and rec.getMessage() == "pw ***"


@pytest.fixture(scope="module")
def search_down_env(tmp_path_factory):
    """The planted settings with OpenSearch chosen as the search backend, where nothing listens."""
    return planted_env(DIALCHECK_SEARCH="opensearch", DIALCHECK_MODELS="local")


@pytest.mark.model
def test_check_with_search_down_keeps_the_password_out_of_the_verdict(search_down_env):
    out = dialcheck(["check", "--context", "Who wrote Hamlet?", "--claim", "Shakespeare wrote Hamlet.",
                     "--format", "json"], search_down_env)
    assert out.returncode == 0, out.stderr[-2000:]
    v = json.loads(out.stdout)
    assert v["status"]["state"] == "degraded" and "opensearch http://***@127.0.0.1:9/" in v["status"]["reason"]
    assert not leaks(out.stdout + out.stderr)


@pytest.mark.model
def test_eval_run_file_keeps_the_password_out(search_down_env, tmp_path, data_dir):
    run = tmp_path / "run.jsonl"
    out = dialcheck(["eval", "--protocol", "e2e", "--surfaces", "r0", "--limit", "2", "--output", str(run), "--json"],
                    search_down_env)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [json.loads(line) for line in run.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 2 and all("http://***@127.0.0.1:9/" in r["status"]["reason"] for r in rows)
    assert not leaks(run.read_text(encoding="utf-8") + out.stdout + out.stderr)


UI_PASSWORD = "S3CRET-xyz"


@pytest.mark.broker
def test_ui_with_a_sasl_broker_url_keeps_the_password_out_of_logs_and_api_state():
    """`dialcheck ui --broker kafka://user:S3CRET-xyz@127.0.0.1:P` with the root logger at DEBUG
    (aiokafka's own lines included). P is a real TCP listener that accepts and closes every
    connection: reachable for the CLI's broker check, never a Kafka broker, so aiokafka fails and
    logs its retries with the address. No SASL broker runs here; what is checked is every byte
    the process writes and /api/state: the host and port appear, the password nowhere."""
    import socket
    import threading
    import time
    import urllib.request

    from streams.ui.server import READY_MARKER

    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(16)
    port = lsn.getsockname()[1]
    stop = threading.Event()

    def drop():
        lsn.settimeout(0.2)
        while not stop.is_set():
            try:
                lsn.accept()[0].close()
            except OSError:
                pass

    threading.Thread(target=drop, daemon=True).start()
    code = ("import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stderr); "
            "from dialcheck.cli import main; raise SystemExit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "DIALCHECK_BROKER_WAIT_S": "5"}
    env.pop("DIALCHECK_KAFKA_BOOTSTRAP", None)
    proc = subprocess.Popen([sys.executable, "-c", code, "ui", "--broker", f"kafka://user:{UI_PASSWORD}@127.0.0.1:{port}",
                             "--port", "0"], cwd=str(REPO_ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith(READY_MARKER), (first, proc.stderr.read() if proc.poll() is not None else "")
        url = first.split()[len(READY_MARKER.split())]
        time.sleep(4)  # aiokafka tries, fails and logs (DEBUG) at least once
        state = urllib.request.urlopen(url + "api/state", timeout=10).read().decode()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        stop.set()
        lsn.close()
    everything = first + out + err + state
    assert UI_PASSWORD not in everything and "S3CRET" not in everything
    assert f"127.0.0.1:{port}" in err and f"127.0.0.1:{port}" in state  # the address itself is shown
    assert "aiokafka" in err, err[-2000:]  # the third-party DEBUG lines were really written (and scrubbed)
