"""Build the SparkSession the audit jobs run on, with the settings PLATFORM.md §6 found necessary.

* workers run this interpreter (`PYSPARK_PYTHON=sys.executable`), else they start the
  system python without pyarrow and die with "Python worker exited unexpectedly";
* local masters bind loopback (`SPARK_LOCAL_IP=127.0.0.1`); the UI is off;
* driver memory 2g, 4 shuffle partitions (the audit tables are small), UTC session time;
* `spark.sql.python.filterPushdown.enabled=true` (the log source implements pushFilters,
  which Spark refuses to call otherwise);
* `master=None` keeps the master spark-submit was given (else `local[*]`);
* on a non-local master the `trafka` package is zipped and shipped with `addPyFile`
  (executors need the decoder); its dependencies (crc32c, lz4, zstandard, cramjam, pyarrow)
  must be installed on the executors.

`check_environment()` returns a one-line message when Java or pyspark is missing, so the
command line can say so instead of printing a JVM stack trace.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import zipfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DRIVER_MEMORY = "2g"
SHUFFLE_PARTITIONS = 4


class AuditEnvironmentError(RuntimeError):
    """Java or pyspark is missing, or Spark could not start."""


def check_environment() -> str | None:
    """None when Spark can start here, else a one-line reason."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed: pip install 'trafka[spark]' (pyspark, pyarrow, pandas<3)"
    if importlib.util.find_spec("pyarrow") is None:
        return "pyarrow is not installed: pip install 'trafka[spark]'"
    java_home = os.environ.get("JAVA_HOME")
    java_in_home = java_home and os.path.isfile(os.path.join(java_home, "bin", "java"))
    if not java_in_home and shutil.which("java") is None:
        return "Java is not installed (Spark needs Java 17+ on PATH or JAVA_HOME)"
    return None


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def _package_zip() -> str:
    """Zip the `trafka` package for executors on a real cluster."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    handle, path = tempfile.mkstemp(prefix="trafka-", suffix=".zip")
    os.close(handle)
    root = os.path.dirname(package_dir)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for folder, _dirs, files in os.walk(package_dir):
            for name in files:
                if name.endswith(".py"):
                    full = os.path.join(folder, name)
                    archive.write(full, os.path.relpath(full, root))
    return path


def under_spark_submit() -> bool:
    """Whether spark-submit started this interpreter (it hands over a JVM gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    master: str | None = DEFAULT_MASTER,
    app_name: str = "trafka-audit",
    *,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Get or create the session and register the trafka data sources on it."""
    problem = check_environment()
    if problem is not None:
        raise AuditEnvironmentError(problem)
    from pyspark.sql import SparkSession

    from trafka.spark.source import BatchDataSource, LogSegmentDataSource

    if master is None and not under_spark_submit():
        master = DEFAULT_MASTER
    local = master is not None and is_local(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    if master is not None:  # None under spark-submit: keep its --master
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true")
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.python.filterPushdown.enabled", "true")
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as error:  # the JVM failed to start: say so in one line
        raise AuditEnvironmentError(f"Spark could not start: {error}".splitlines()[0]) from None
    spark.sparkContext.setLogLevel("ERROR")
    if not is_local(spark.sparkContext.master or ""):
        spark.sparkContext.addPyFile(_package_zip())
    spark.dataSource.register(LogSegmentDataSource)
    spark.dataSource.register(BatchDataSource)
    return spark
