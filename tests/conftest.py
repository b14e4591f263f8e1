"""Shared pytest configuration. Fixtures for real processes live in tests/support/."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

# CI runs on 2 shared cores: no hypothesis deadlines (they would flake), modest example counts.
settings.register_profile(
    "default", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", deadline=None, max_examples=200, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


# `make test` runs the suite on two pytest-xdist workers (`--dist loadgroup`). Tests that
# load both cores by themselves (Spark, long multi-node runs under fault injection, the
# fuzzer, a million-message order check; Java programs) run one at a time, each kind on one
# worker, so two of them never share the machine's two cores; everything else is spread
# over both workers, a test module at a time: a module's tests share its module-scoped
# fixtures (a cluster started once, not once per worker) and may build on each other's
# state. Without xdist (`-p no:xdist`, `-n 0`) the markers change nothing.
_GROUPS: dict[str, str] = {
    "tests/spark/": "spark",
    "tests/chaos/test_chaos_run.py": "heavy",
    "tests/fuzz/test_fuzz.py": "heavy",
    "tests/cluster/test_order.py": "heavy",
    "tests/cluster/test_transactions_cluster.py": "heavy",
    "tests/cluster/test_java_": "java",
    "tests/bench/": "java",
    "tests/log/test_crash.py": "heavy",
}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = str(config.rootpath)
    for item in items:
        path = str(item.path)[len(root) + 1 :]
        for prefix, group in _GROUPS.items():
            if path.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
                break
        else:
            item.add_marker(pytest.mark.xdist_group(path))
