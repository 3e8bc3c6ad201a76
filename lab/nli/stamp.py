"""`dialcheck nli stamp`: the decision and display of a model, declared valid for a model made from
it (an int8 quantization, a release of the same weights), so the worker accepts the new one.

Why a command: the worker refuses a decision or display fitted for another NLI version (its
thresholds read another model's probabilities), so a quantized model is refused until they are
refitted (`dialcheck tune fit` + `dialcheck calibrate`: minutes to hours) or stamped. Stamping is the
cheap, honest-about-itself path: each stamped file keeps what it was fitted for under
`meta.stamped_from`, and is only right as far as the new model's probabilities agree with the old
one's (quantize reports that agreement)."""
from __future__ import annotations

import json
from pathlib import Path

from schemas.atomic import write_text

FILES = ("decision", "display")


def fitted_files(source_dir: str | Path) -> dict[str, Path]:
    """The decision and display files a worker on `source_dir` reads (beside it, else the settings')."""
    from schemas.settings import load_settings

    s = load_settings(models={"nli_model_dir": str(source_dir)})
    return {"decision": Path(s.decision.decision_params), "display": Path(s.decision.display_params)}


def stamp(model_dir: str | Path, source_dir: str | Path) -> list[Path]:
    """Write `model_dir`/decision.json and display.json: `source_dir`'s, fitted-for version set to
    `model_dir`'s (calibration.json), the original kept in `meta.stamped_from`. Files written."""
    from workers.models.onnx_nli import model_version

    out, version = Path(model_dir), model_version(Path(model_dir))
    written = []
    for name, src in fitted_files(source_dir).items():
        if not src.is_file():
            continue
        d = json.loads(src.read_text())
        meta = d.setdefault("meta", {})
        fitted = meta.get("nli_model") or {}
        meta["stamped_from"] = {"file": str(src), "nli_model": fitted}
        meta["nli_model"] = {**fitted, "version": version, "dir": str(out)}
        write_text(out / f"{name}.json", json.dumps(d, indent=1) + "\n")
        written.append(out / f"{name}.json")
    return written


def acceptable_line(model_dir: str | Path, source_dir: str | Path | None = None) -> str:
    """What a command that writes a new model directory ends with: how to make the worker accept it."""
    src = f" --from {source_dir}" if source_dir else ""
    return (f"the worker refuses {model_dir} until its decision and display are fitted for it: stamp them "
            f"(`dialcheck nli stamp --model-dir {model_dir}{src}`) or refit them (docs/operations.md), then move "
            f"it beside the live model directory and `dialcheck adapt-loop --model-dir LIVE --promote DIR`")
