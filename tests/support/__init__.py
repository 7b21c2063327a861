"""Helpers shared by the test tiers (not fixtures: those live in conftest.py files)."""
