"""``coc-run``: place ranks over sites, start them through per-site agents, tear down on failure.

The parts, one job each: :mod:`~coc.launcher.placement` (ranks onto slots),
:mod:`~coc.launcher.plan` (the whole job, printed by ``--dry-run``),
:mod:`~coc.launcher.environment` (what a rank sees; scheduler allocations),
:mod:`~coc.launcher.control` (``coc-run``'s side of the control plane),
:mod:`~coc.launcher.agent` (the per-site agent), :mod:`~coc.launcher.spawners` (how an agent
is started on a site), :mod:`~coc.launcher.output` (collated output). The rank's half of the
rendezvous is :mod:`coc.rendezvous` and the control channel's framing :mod:`coc.protocol`,
outside the launcher: every rank's ``coc.init()`` imports them.
"""
