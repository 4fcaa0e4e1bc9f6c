"""Fault-test programs: ranks run by coc-run (tests/launcher/test_failover.py,
tests/testbed/test_failover.py), not test modules; never imported for doctests."""

collect_ignore = ["programs"]
