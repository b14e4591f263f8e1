"""Imported first by `knode`: keep a node process from importing what it never uses.

kio's phantom types import `hypothesis` (to register strategies) whenever it is installed,
as it is in the development venv where the tests and benchmarks start hundreds of nodes:
~0.3-0.5 s of CPU per node start (a quarter of knode's imports; issue 19, T1). A node
process (`python -m trafka.tools.knode`, or the `knode` script) marks the module as absent,
so kio takes its "not installed" branch. Anything else that imports trafka (a pytest
process using hypothesis, ktool) is left alone.
"""

from __future__ import annotations

import os
import sys


def _is_knode_process() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and getattr(spec, "name", "") == "trafka.tools.knode":
        return True
    return os.path.basename(sys.argv[0] if sys.argv else "") == "knode"


if _is_knode_process():
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
