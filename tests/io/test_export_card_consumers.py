"""Issue 31: the stepwise card named ``PRMTrainer``, which the installed TRL does not export.
The card names what the current release has (nothing, for process reward models) and keeps the
older spelling as a note; this test reads the installed TRL, so a release that brings a PRM
trainer back (or a pin that moves) fails here until the card says so."""

from __future__ import annotations

import importlib
from importlib.metadata import version

from preflab.io.export.trl_stepwise import TRL_CHECKED, TRLStepwise


def test_the_checked_trl_release_is_the_installed_one():
    assert version("trl").startswith(TRL_CHECKED + "."), version("trl")


def test_the_installed_trl_has_no_prm_trainer_and_the_card_says_so():
    import trl

    assert not hasattr(trl, "PRMTrainer")
    experimental = importlib.import_module("trl.experimental")
    assert not any("prm" in name.lower() for name in dir(experimental))
    text = "\n".join(TRLStepwise().usage({}))
    assert f"TRL {TRL_CHECKED}" in text and "ships no trainer" in text
    assert "`PRMTrainer`" in text and "TRL 0.x" in text  # the older spelling, as a note
    assert "PRMTrainer" not in TRLStepwise.description
