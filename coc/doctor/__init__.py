"""``coc doctor TOPOLOGY``: check a topology against the real machines before a job.

:mod:`coc.doctor.probe` is the program run as one rank on every host that can run ranks,
started by ``coc-run`` through the same spawners, profiles and testbed a job would use;
:mod:`coc.doctor.check` runs it and turns what it reports (and what ``coc-run`` says when
a site, a Python or a link fails) into a table with one actionable line per problem.
"""
