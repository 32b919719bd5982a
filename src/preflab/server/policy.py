"""The project settings and policy moved to :mod:`preflab.schema.policy` (typed once for the
server, the CLI and ``io``); this name stays for the code and tests that import it here."""

from ..schema.policy import (
    Drift,
    Policy,
    Qualification,
    Settings,
    TelemetryPolicy,
    VerbosityPolicy,
    policy_of,
    settings_of,
)

__all__ = [
    "Drift",
    "Policy",
    "Qualification",
    "Settings",
    "TelemetryPolicy",
    "VerbosityPolicy",
    "policy_of",
    "settings_of",
]
