"""The topology of a cluster of clusters: sites, hosts, networks, gateways, routes and levels."""

from coc.topology.levels import LEVELS, levels
from coc.topology.model import (DEFAULT_FORWARD_COST, ROLES, SCOPES, SPAWNERS, TECHNOLOGIES,
                                Topology, from_dict, hosts, library_names, library_path, load,
                                loads, networks, placement_slots, sites, to_dict)
from coc.topology.routing import Hop, Route, route
from coc.topology.tables import RouteTables, gateway_sets, gateways, route_tables
from coc.topology.validate import validate

__all__ = ["Topology", "load", "loads", "from_dict", "to_dict", "validate", "sites", "hosts",
           "networks", "placement_slots", "library_names", "library_path", "route", "Route",
           "Hop", "route_tables", "RouteTables", "gateways", "gateway_sets", "levels", "LEVELS", "TECHNOLOGIES", "ROLES", "SCOPES", "SPAWNERS",
           "DEFAULT_FORWARD_COST"]
