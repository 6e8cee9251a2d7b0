"""Plain helpers more than one test module uses (no fixtures: those are in tests/plugins/).

Test modules import from here, never from one another (tests/test_no_test_imports.py).
"""
