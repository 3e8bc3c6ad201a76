"""`dialcheck calibrate`: every ordinary mistake in what it is given (a run or label file that is not
JSON lines, a display file that is not one, an --out it cannot write) is one `dialcheck: …` line and
exit 2, and writes nothing. Why: these are the files an operator hands it by hand; a traceback
there says "bug" where the answer is "that file"."""
from __future__ import annotations

import json

import pytest

from dialcheck.cli import main

pytestmark = pytest.mark.unit

SHIPPED = "workers/display/params/display.json"
GOOD_ROW = {"protocol": "fv", "surface_mode": "r0", "record_id": "r0", "claim_id": "c0", "label": "SUPPORTS",
            "probabilities": {"SUPPORTS": 0.9, "REFUTES": 0.05, "NOT ENOUGH INFO": 0.05},
            "status": {"state": "ok", "reason": None, "evidence": "strong"}, "uncovered": [],
            "surface": {"text": "claim 0"}, "rationale_numbers": {"entail": 0.9, "contradict": 0.05, "coverage": 0.9}}


def _files(tmp_path) -> dict[str, str]:
    files = {"run": json.dumps(GOOD_ROW) + "\n", "labels": '{"id": "r0", "response_label": "SUPPORTS"}\n',
             "notjson": '{"id": "r0"}\n{not json\n', "list": "[1, 2]\n", "notrun": '{"x": 1}\n',
             "display_list": "[1]\n", "display_nokeys": '{"format": "dialcheck-display", "version": 2}\n',
             "display_format": '{"format": "something-else"}\n'}
    out = {}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
        out[name] = str(tmp_path / name)
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00\x01")
    out["binary"] = str(tmp_path / "binary")
    return out


@pytest.mark.parametrize("argv, says", [
    (["--run", "{notjson}", "--labels", "{labels}"], "notjson:2: not JSON"),
    (["--run", "{list}", "--labels", "{labels}"], "list:1: not a JSON object"),
    (["--run", "{binary}", "--labels", "{labels}"], "binary: not a UTF-8 text file"),
    (["--run", "{notrun}", "--labels", "{labels}"], "not a run file of `dialcheck eval --output`"),
    (["--run", "{run}", "--labels", "{list}"], "list:1: not a JSON object"),
    (["--run", "{run}", "--labels", "{labels}", "--display", "{display_list}"], "not a display JSON file"),
    (["--run", "{run}", "--labels", "{labels}", "--display", "{display_nokeys}"], "(no 'show' field)"),
    (["--run", "{run}", "--labels", "{labels}", "--display", "{display_format}"], "not a dialcheck-display"),
    (["--run", "{run}", "--labels", "{labels}", "--display", "{binary}"], "not a display JSON file"),
    (["--yardstick", "--display", "{display_list}"], "not a display JSON file"),
])
def test_bad_input_files_are_one_line_exit_2(tmp_path, capsys, argv, says):
    files = _files(tmp_path)
    out = tmp_path / "display-out.json"
    argv = [a.format(**files) for a in argv]
    if "--display" not in argv:
        argv += ["--display", SHIPPED]
    rc = main(["calibrate", *argv, "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("dialcheck: ") and says in err[0], err
    assert not out.exists()


def test_a_bad_display_setting_is_one_line(tmp_path, capsys, monkeypatch):
    files = _files(tmp_path)
    monkeypatch.setenv("DIALCHECK_DISPLAY_PARAMS", files["display_list"])
    rc = main(["calibrate", "--run", files["run"], "--labels", files["labels"], "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "(DIALCHECK_DISPLAY_PARAMS) is not a display JSON file" in err[0], err


def test_an_out_it_cannot_write_is_one_line(tmp_path, capsys):
    """--out a directory is refused before any work; --out under a regular file fails at the write,
    after certification, still as one line (and the store's certified labels are not lost: rerun)."""
    from schemas.feedback import Feedback
    from streams.feedback_store import FeedbackStore

    store = tmp_path / "feedback.sqlite3"
    verdicts, feedback = [], []
    for i in range(20):  # 20 SUPPORTS badges, all right: enough to certify at 0.85 / 0.9
        v = {**GOOD_ROW, "conversation_id": f"c{i}", "turn_id": f"c{i}#t", "claim_id": f"k{i}", "claim": f"claim {i}",
             "rationale": {"numbers": GOOD_ROW["rationale_numbers"]}, "display": {"show": True, "confidence": "medium"}}
        verdicts.append(v)
        feedback.append(Feedback(f"c{i}", f"c{i}#t", "SUPPORTS", "right", "moderator", 1000.0 + i, claim_id=f"k{i}",
                                 claim_index=0))
    with FeedbackStore(store) as st:
        st.add_verdicts(verdicts, [0] * len(verdicts))
        st.add_feedback(feedback)
    base = ["calibrate", "--from-feedback", "--store", str(store), "--display", SHIPPED]
    assert main([*base, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"dialcheck: --out {tmp_path} is a directory: name the display file to write (DISPLAY.json)"
    (tmp_path / "afile").write_text("x")
    bad = tmp_path / "afile" / "display.json"
    assert main([*base, "--out", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"dialcheck: --out {bad}: cannot write it"), err
    good = tmp_path / "display.json"
    assert main([*base, "--out", str(good)]) == 0 and json.loads(good.read_text())["certified"]["n"] == 20
