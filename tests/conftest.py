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


# `make test` runs the suite on two pytest-xdist workers with `--dist loadfile`: a test
# module at a time, so a module's tests share its module-scoped fixtures (a cluster started
# once, not once per worker) and may build on each other's state (test_acls' consumer test
# reads what the producer test wrote). Until 2026-11-27 it was `--dist loadgroup` with
# groups for the heavy tests (Spark, chaos, fuzz, Java), but pytest-xdist 3.8 marks a
# group by assigning `item._nodeid`, which pytest 9 no longer reads: no group ever reached
# the scheduler, every test was scheduled alone and modules were split across workers.
