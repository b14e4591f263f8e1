"""Shared pytest configuration. Fixtures for real processes live in tests/support/."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI runs on 2 shared cores: no hypothesis deadlines (they would flake), modest example counts.
settings.register_profile(
    "default", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")
