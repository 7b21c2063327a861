"""Column types as data: what the table catalogue and the job's typed output rows are declared with.

A type renders as Spark's DDL (``ddl``, for the docs and table creation); the job turns it into a Spark type
(``streaming.job.delta.bus.spark_type``). Nothing parses DDL text.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SqlType:
    """A column's type: a scalar, an array of ``element`` or a struct of ``fields``, written as Spark's DDL."""

    name: str
    element: SqlType | None = None
    fields: tuple[Column, ...] = ()

    @property
    def ddl(self) -> str:
        if self.element is not None:
            return f"ARRAY<{self.element.ddl}>"
        if self.name == "STRUCT":
            return "STRUCT<" + ", ".join(f"{c.name}: {c.type.ddl}" for c in self.fields) + ">"
        return self.name


@dataclass(frozen=True)
class Column:
    name: str
    type: SqlType


STRING, BIGINT, INT, BOOLEAN, DOUBLE, TIMESTAMP = (
    SqlType(n) for n in ("STRING", "BIGINT", "INT", "BOOLEAN", "DOUBLE", "TIMESTAMP")
)


def columns(**types: SqlType) -> tuple[Column, ...]:
    """Columns in the order given: ``columns(group=STRING, queue_id=INT)``."""
    return tuple(Column(name, type_) for name, type_ in types.items())


def array_of(element: SqlType) -> SqlType:
    return SqlType("ARRAY", element)


def struct_of(**fields: SqlType) -> SqlType:
    return SqlType("STRUCT", fields=columns(**fields))
