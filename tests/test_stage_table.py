"""The stage table (workers/building.py `STAGE_TABLE`) covers every protocol × surface: each gets a
chain that passes the field and capability checks, with the stages its protocol and surface mean,
and nothing in the table names a protocol or surface that does not exist."""
from __future__ import annotations

import pytest

from schemas.protocols import LABEL_PROTOCOLS, PROTOCOLS, RETRIEVAL_PROTOCOLS, SURFACES
from workers.building import GATED_SURFACES, STAGE_TABLE
from workers.llm.stages import R5_SURFACES
from workers.pipeline import Pipeline

pytestmark = pytest.mark.model


def test_the_table_names_only_known_protocols_and_surfaces():
    for row in STAGE_TABLE:
        assert set(row.protocols) <= set(PROTOCOLS) and set(row.surfaces) <= set(SURFACES), row
    assert set(R5_SURFACES) | set(GATED_SURFACES) <= set(SURFACES)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_surface_gets_a_checked_chain(settings, nli, encoder, protocol):
    """Built (and so checked: `check_chain`) for every surface, with the LLM steps on so that every
    row of the table is reached somewhere; no searcher and no LLM endpoint are needed to build."""
    on = settings.updated(llm={"edit": True, "judge": True}, claims={"checkworthy": True})
    for surface in SURFACES:
        names = [st.name for st in Pipeline(on, nli, encoder, None, protocol, surface).stages]
        expected = (["language", "checkworthy"] if protocol in LABEL_PROTOCOLS else []) + ["surfaces"] \
            + (["gate"] if surface in GATED_SURFACES else []) + (["r5"] if surface in R5_SURFACES else []) \
            + (["retrieve", "edit"] if protocol in RETRIEVAL_PROTOCOLS else []) \
            + (["evidence"] if protocol == "fv" else []) + (["verify", "judge"] if protocol in LABEL_PROTOCOLS else [])
        assert names == expected, (protocol, surface)


def test_the_settings_switch_rows_off(settings, nli, encoder):
    """Check-worthiness with no turn kind to skip, editing and the judge off: those rows drop out."""
    off = settings.updated(llm={"edit": False, "judge": False}, claims={"checkworthy": False, "skip_turns": ""})
    assert [st.name for st in Pipeline(off, nli, encoder, None, "e2e", "r0").stages] == ["language", "surfaces", "retrieve", "verify"]


def test_the_surface_default_is_the_settings(settings, nli, encoder):
    assert Pipeline(settings, nli, encoder, None, "fv").surface == settings.claims.surface
    assert Pipeline(settings.updated(claims={"surface": "r4"}), nli, encoder, None, "fv").surface == "r4"
