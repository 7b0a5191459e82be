"""Plain SQL on a store of either backend, beside the store's own code: what is really in it."""

from __future__ import annotations

from typing import Any

import sqlalchemy

from pytest_modelsweep.core.store_location import parse_store_location


def engine_of(store: str) -> sqlalchemy.Engine:
    location = parse_store_location(store)
    if location.path is not None:
        return sqlalchemy.create_engine(f"sqlite:///{location.path}", connect_args={"timeout": 30})
    return sqlalchemy.create_engine(
        location.url.replace("postgresql://", "postgresql+psycopg://", 1)
    )


def raw_sql(store: str, *statements: str) -> list[list[tuple[Any, ...]]]:
    """Run ``statements`` in one transaction; the rows each returned."""
    engine = engine_of(store)
    try:
        with engine.begin() as conn:
            results = [conn.exec_driver_sql(sql) for sql in statements]
            return [list(map(tuple, r.fetchall())) if r.returns_rows else [] for r in results]
    finally:
        engine.dispose()


def all_text(store: str) -> str:
    """Every value of every table of the store, as text (for looking for secrets)."""
    engine = engine_of(store)
    try:
        with engine.connect() as conn:
            tables = sqlalchemy.inspect(conn).get_table_names()
            # each value whole (a row's repr cuts long values short, and could hide a secret)
            return "\n".join(
                " | ".join(map(str, row))
                for table in tables
                for row in conn.exec_driver_sql(f'SELECT * FROM "{table}"')
            )
    finally:
        engine.dispose()
