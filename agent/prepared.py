"""Prepared statements for the hot path: a Core statement compiled once per database dialect and run
on the connection's own DB-API cursor, inside the caller's SQLAlchemy transaction.

`Connection.execute` spends about ten microseconds per statement (cache-key lookup, execution
context, result object) before the database sees it; a tool step issues five statements, so that
was a quarter of its time. Here the SQL text, the order of its parameters and the type's bind
processors (aware UTC datetimes, JSON) are worked out once; each execution only converts values.
The statement, the transaction and what is stored are exactly those of `Connection.execute`, and
so are its errors (a driver error becomes SQLAlchemy's `IntegrityError`, `OperationalError`, ...;
a lost connection is invalidated).

Only statements whose every value comes from the parameters or from the statement itself qualify:
one needing a Python-side column default is refused when first compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import Connection, Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

Processor = Callable[[Any], Any] | None


class _Compiled:
    __slots__ = ("compiled", "names", "positional", "processors", "sql")

    def __init__(self, stmt: ClauseElement, dialect: Dialect, keys: tuple[str, ...] | None) -> None:
        compiled: Any = stmt.compile(dialect=dialect, column_keys=list(keys) if keys is not None else None)
        if compiled.insert_prefetch or compiled.update_prefetch or compiled.escaped_bind_names:
            raise ValueError(f"not preparable (column defaults or escaped names): {compiled.string}")
        self.compiled = compiled
        self.sql: str = compiled.string
        self.positional: bool = compiled.positional
        self.names: tuple[str, ...] = tuple(compiled.positiontup if compiled.positional else compiled.binds)
        self.processors: dict[str, Processor] = {
            name: bind.type.dialect_impl(dialect).bind_processor(dialect)
            for name, bind in compiled.binds.items()
        }

    def parameters(self, params: Mapping[str, Any]) -> Any:
        """The DB-API parameters, each value through its type's processor (None too: JSON stores `null`)."""
        values = self.compiled.construct_params(params, _check=True)
        for name, process in self.processors.items():
            if process is not None:
                values[name] = process(values[name])
        return tuple(values[name] for name in self.names) if self.positional else values


class Prepared:
    """One statement; `run(conn, params)` executes it and returns the first column of its first row
    (a RETURNING id) or None.

    An INSERT is compiled for the columns it is given (`keys`), so the same dict shape must be passed
    each time: a different set of keys compiles once more.
    """

    def __init__(self, stmt: ClauseElement) -> None:
        self.stmt = stmt
        self._compiled: dict[tuple[str, tuple[str, ...] | None], _Compiled] = {}

    def run(self, conn: Connection, params: Mapping[str, Any], *, insert: bool = False) -> Any:
        keys = tuple(params) if insert else None
        dialect = conn.dialect
        found = self._compiled.get((dialect.name, keys))
        if found is None:
            found = self._compiled[(dialect.name, keys)] = _Compiled(self.stmt, dialect, keys)
        raw = conn.connection.dbapi_connection
        cursor = raw.cursor()  # type: ignore[union-attr]
        values = found.parameters(params)
        try:
            cursor.execute(found.sql, values)
            row = cursor.fetchone() if cursor.description else None
        except dialect.loaded_dbapi.Error as exc:  # as `Connection.execute` raises it
            gone = dialect.is_disconnect(exc, raw, cursor)
            if gone:
                conn.invalidate(exc)
            raise DBAPIError.instance(
                found.sql,
                values,
                exc,
                dialect.loaded_dbapi.Error,
                hide_parameters=conn.engine.hide_parameters,
                connection_invalidated=gone,
                dialect=dialect,
            ) from exc
        finally:
            cursor.close()
        return row[0] if row else None
