"""Fixtures shared by every tier. Tier-specific fixtures live in each tier's conftest.py."""
