"""The PostgreSQL run beside the SQLite one keeps exactly the tests that can reach the
database (``AGENTMEMORY_TEST_DATABASE_ONLY``, tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import touches_the_database


@pytest.fixture
def a_thread(db: None) -> str:
    """A fixture of the suite's own that reaches the database through ``db``."""
    return "thread"


def test_a_test_with_no_database_fixture_is_left_out(request: pytest.FixtureRequest) -> None:
    assert not touches_the_database(request.node)


def test_a_database_fixture_of_a_fixture_keeps_the_test(
    request: pytest.FixtureRequest, a_thread: str
) -> None:
    assert touches_the_database(request.node)


@pytest.mark.django_db
def test_the_django_db_mark_keeps_the_test(request: pytest.FixtureRequest) -> None:
    assert touches_the_database(request.node)


def test_asking_the_vendor_keeps_the_test(
    request: pytest.FixtureRequest, on_postgres: bool
) -> None:
    assert touches_the_database(request.node)
