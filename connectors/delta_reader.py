"""Reading the monitor's Delta tables without a JVM: delta-rs loads a snapshot, DuckDB answers.

Spark writes the tables; ``rebalance-monitor query``, ``query sql`` and ``allocate --delta-root`` read them
here in well under a second. Each table is read at one committed version (the latest, a given version, or
the last one committed at or before a time), so a reader sees whole commits only while the job goes on
committing. A root is a local path or an object-store URI (``s3a://``, reached with the storage options of
``connectors.object_store.delta_rs_options``). Table names come from the catalogue
(``streaming.contract.tables``); the layout and the supported table features are in
``docs/design/delta-readers.md``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.object_store import is_local, join
from streaming.contract.tables import TABLES

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    from deltalake import DeltaTable

# Reader features of the Delta protocol (minReaderVersion 3) that delta-rs reads through ``DeltaTable.scan``.
# Every table the job writes must need none other (tests/integration/test_delta_interop.py checks).
# (Not typeWidening: delta-rs 1.6.6 refuses a table that requires it, "Unsupported table features required".)
READABLE_READER_FEATURES = frozenset(
    {"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
)
SNAPSHOT_ATTEMPTS = 3  # a latest-version read that meets a file the job just replaced starts again


class TableMissing(LookupError):
    """No Delta table by that name under the root."""


class VersionMissing(LookupError):
    """The table has no such version (not yet written, or its log already cleaned up)."""


StorageOptions = dict[str, str] | None  # delta-rs storage options of an object-store root; None for local ones


def is_table(path: str | Path, storage_options: StorageOptions = None) -> bool:
    """Whether a Delta table (a ``_delta_log``) is at ``path``."""
    if is_local(str(path)):
        return (Path(path) / "_delta_log").is_dir()
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(str(path), storage_options=storage_options))


def table_names(root: str | Path, storage_options: StorageOptions = None) -> list[str]:
    """The catalogue's tables that exist under ``root``, in catalogue order."""
    return [name for name in TABLES if is_table(join(str(root), name), storage_options)]


def load_table(
    path: str | Path, version: int | None = None, as_of_ms: int | None = None, storage_options: StorageOptions = None
) -> DeltaTable:
    """The table at ``version``, or its last version committed at or before ``as_of_ms``, or its latest."""
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    if is_local(str(path)) and not is_table(path):
        raise TableMissing(f"no Delta table {name!r} at {path}")
    try:
        table = DeltaTable(str(path), version=version, storage_options=storage_options)
        if as_of_ms is not None:
            table.load_as_version(datetime.fromtimestamp(as_of_ms / 1000, UTC))
    except TableNotFoundError:
        raise TableMissing(f"no Delta table {name!r} at {path}") from None
    except (DeltaError, ValueError) as error:
        latest = _latest(path, error, storage_options)
        raise VersionMissing(f"{name} has no {_wanted(version, as_of_ms)} ({latest})") from None
    if as_of_ms is not None:
        # delta-rs falls back to the first version for a time before it: that table did not exist yet.
        committed = _commit_ms(path, table)
        if committed is not None and committed > as_of_ms:
            raise VersionMissing(f"{name} has no {_wanted(version, as_of_ms)} (its first commit is later)")
    return table


def _commit_ms(path: str | Path, table: DeltaTable) -> int | None:
    """When the table's loaded version was committed (ms): its commit file's time on a local disk, its commit
    info's on an object store (delta-rs lists no file times there)."""
    if is_local(str(path)):
        commit = Path(path) / "_delta_log" / f"{table.version():020d}.json"
        return commit.stat().st_mtime_ns // 1_000_000 if commit.exists() else None
    entries = [e for e in table.history(limit=1) if int(e["version"]) == table.version()]
    return int(entries[0]["timestamp"]) if entries and "timestamp" in entries[0] else None


def read_arrow(
    path: str | Path,
    version: int | None = None,
    as_of_ms: int | None = None,
    columns: Sequence[str] | None = None,
    predicate: str | None = None,
    storage_options: StorageOptions = None,
) -> pa.Table:
    """One table's rows at one version as an Arrow table (``predicate`` in DataFusion SQL)."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    pinned = version is not None or as_of_ms is not None
    for attempt in range(SNAPSHOT_ATTEMPTS):
        table = load_table(path, version, as_of_ms, storage_options)
        try:
            reader = table.scan(columns=list(columns) if columns else None, predicate=predicate)
            return pa.RecordBatchReader.from_stream(reader).read_all()
        except (DeltaError, OSError):
            # A pinned version's files are kept for the table's retention; the latest may have moved on.
            if pinned or attempt == SNAPSHOT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


class MonitorTables:
    """The monitor's tables under one root, each a DuckDB view by its name, read as of one moment."""

    def __init__(self, root: str | Path, as_of_ms: int | None = None, storage_options: StorageOptions = None) -> None:
        self.root = str(root)
        self.as_of_ms = as_of_ms  # None: the latest version of every table
        self.storage_options = storage_options

    def names(self) -> list[str]:
        return table_names(self.root, self.storage_options)

    def arrow(
        self, name: str, version: int | None = None, columns: Sequence[str] | None = None, predicate: str | None = None
    ) -> pa.Table:
        if name not in TABLES:
            raise TableMissing(f"{name!r} is not a monitor table (tables: {', '.join(TABLES)})")
        as_of = None if version is not None else self.as_of_ms
        return read_arrow(join(self.root, name), version, as_of, columns, predicate, self.storage_options)

    def connect(self, names: Iterable[str], versions: dict[str, int] | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB with a view per table (UTC session time zone, no extension downloads)."""
        import duckdb

        connection = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        connection.execute("SET TimeZone = 'UTC'")  # as the job's Spark sessions
        connection.execute("SET default_null_order = 'nulls_first'")  # as Spark SQL sorts
        for name in names:
            connection.register(name, self.arrow(name, (versions or {}).get(name)))
        return connection

    def sql(self, statement: str, parameters: dict[str, Any] | None = None, version: int | None = None) -> pa.Table:
        """DuckDB SQL (``$name`` parameters) over the tables it names; ``version`` pins the one table it reads."""
        import duckdb
        import pyarrow as pa

        try:  # the parser names no table of a statement with parameters: NULLs in their place
            named = duckdb.get_table_names(re.sub(r"\$\w+", "NULL", statement) if parameters else statement)
        except duckdb.Error as error:
            raise ValueError(_first_line(error)) from None
        tables = [n for n in TABLES if n in named]
        unknown = sorted(n for n in named if n not in TABLES)
        if unknown:
            raise TableMissing(f"no monitor table {', '.join(map(repr, unknown))} (tables: {', '.join(TABLES)})")
        if version is not None and len(tables) != 1:
            raise ValueError(f"a version is one table's, and the statement reads {len(tables)} tables")
        with self.connect(tables, {tables[0]: version} if version is not None else None) as connection:
            try:
                result = connection.sql(statement, params=parameters)
            except duckdb.Error as error:
                raise ValueError(_first_line(error)) from None
            return pa.table({}) if result is None else result.to_arrow_table()


def rows(table: pa.Table) -> list[dict[str, Any]]:
    """Arrow rows as Python values: timestamps as naive UTC datetimes (as Spark's ``collect`` gives them),
    DuckDB's wide integers (a ``sum`` of BIGINT) as ints."""
    return [{k: _plain(v) for k, v in row.items()} for row in table.to_pylist()]


def _plain(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _wanted(version: int | None, as_of_ms: int | None) -> str:
    return f"version {version}" if version is not None else f"version committed at or before {_iso(as_of_ms)}"


def _latest(path: str | Path, error: BaseException, storage_options: StorageOptions = None) -> str:
    from deltalake import DeltaTable

    try:
        return f"its latest is {DeltaTable(str(path), storage_options=storage_options).version()}"
    except Exception:  # noqa: BLE001 - the table itself cannot be read: say what delta-rs said
        return _first_line(error)


def _iso(ms: int | None) -> str:
    return "" if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:300]
