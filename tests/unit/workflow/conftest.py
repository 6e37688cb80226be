"""Fixtures for the workflow tests."""

from __future__ import annotations

import pytest

from flow import FlowEngine


@pytest.fixture
def engine() -> FlowEngine:
    return FlowEngine()
