"""Molecular dynamics of a Lennard-Jones liquid with spatial decomposition, as LAMMPS runs it.

The application of the grid case-study paper (Zhao), which ran a LAMMPS-like parallel
molecular dynamics code across a meta-cluster: the box of atoms is cut into one brick per
rank, each rank moves the atoms in its brick, and only atoms near a brick's faces travel.
Here the run is LAMMPS's own Lennard-Jones benchmark (``bench/in.lj``): an FCC lattice at
reduced density 0.8442 melting from temperature 1.44, cut-off 2.5 sigma (potential shifted
to zero there), time step 0.005, velocity Verlet at constant energy. The ranks form a
``px`` x ``py`` x ``pz`` grid of bricks, rank numbers running along z fastest, so on
``two-sites`` the sites meet across one plane of bricks. Each step

- atoms that left their brick move to the neighbouring rank, one dimension after the
  other (x, then y, then z, so a corner crossing takes two or three hops);
- each rank sends copies ("ghosts") of the atoms within the cut-off of a face to the
  neighbour across it, again dimension by dimension, forwarding ghosts it has received so
  the corner and edge neighbours get theirs too (six ``sendrecv`` calls a step: the
  object form moves a NumPy array of any length with its shape in one message, the
  array's memory sent out of band);
- every rank computes the forces on its own atoms from its atoms and ghosts, binned in
  cells one cut-off wide so each atom meets only the atoms of the 27 cells around it.

Every ``--thermo`` steps an ``allreduce`` sums the kinetic and potential energy.

It checks itself by the conservation laws of the run: no atom is lost or duplicated, the
total momentum stays zero (to 1e-9 per atom), and the total energy, summed every
``--thermo`` steps, never moves ``--drift`` (default 1e-3) per atom or more from the start.

Run: ``coc-run -n 8 python examples/md.py`` (500 atoms, 50 steps; CI size).
Real size: ``coc-run -n 8 python examples/md.py --cells 12 --steps 100`` (6912 atoms).
"""

import argparse

import numpy as np

import coc
from coc.bench.application import Stopwatch, report


DENSITY, CUTOFF, DT = 0.8442, 2.5, 0.005
SHIFT = 4 * (CUTOFF ** -12 - CUTOFF ** -6)        # the potential's value at the cut-off


def brick_grid(size):
    """Return the most nearly cubic ``(px, py, pz)`` with ``px * py * pz == size``."""
    best = None
    for px in range(1, size + 1):
        for py in range(1, size // px + 1):
            if size % (px * py) == 0:
                dims = sorted((px, py, size // (px * py)), reverse=True)
                if best is None or max(dims) - min(dims) < max(best) - min(best):
                    best = dims
    return tuple(best)


def lattice(cells, temperature, seed):
    """Return positions and velocities of an FCC lattice of ``4 cells^3`` atoms, and the box."""
    side = cells * (4 / DENSITY) ** (1 / 3)
    spacing = side / cells
    corner = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    cell = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    positions = ((cell + corner + 0.25) * spacing).reshape(-1, 3)   # off the brick faces
    velocities = np.random.default_rng(seed).normal(size=positions.shape)
    velocities -= velocities.mean(axis=0)
    velocities *= np.sqrt(temperature * (3 * len(velocities) - 3) / (velocities ** 2).sum())
    return positions, velocities, side


def forces(atoms, everything):
    """Return the forces on ``atoms`` from ``everything`` (atoms first, then ghosts) and their
    potential energy.

    Everything is binned into cells at least one cut-off wide (with an empty layer around),
    so an atom's partners lie in its own cell and the 26 around it: the cost grows with the
    number of atoms, not its square.
    """
    origin = everything.min(axis=0)
    shape = np.maximum(((everything.max(axis=0) - origin) // CUTOFF).astype(int), 1)
    width = (everything.max(axis=0) - origin) / shape + 1e-12
    index = np.minimum((everything - origin) // width, shape - 1).astype(int) + 1
    dims = shape + 2
    cell = np.ravel_multi_index(index.T, dims)
    order = np.argsort(cell, kind="stable")
    counts = np.bincount(cell, minlength=dims.prod())
    members = np.full((dims.prod(), counts.max()), -1)
    slot = np.arange(len(order)) - (np.cumsum(counts) - counts)[cell[order]]
    members[cell[order], slot] = order            # members[c] = the atoms in cell c, -1 after
    around = np.ravel_multi_index(np.indices((3, 3, 3)).reshape(3, -1), dims) \
        - np.ravel_multi_index((1, 1, 1), dims)             # the 27 cells' index offsets
    force, energy = np.zeros_like(atoms), 0.0
    for begin in range(0, len(atoms), 256):      # in chunks: bounded memory
        chunk = slice(begin, min(begin + 256, len(atoms)))
        partners = members[cell[chunk, None] + around].reshape(chunk.stop - begin, -1)
        delta = atoms[chunk, None, :] - everything[partners]
        r2 = np.einsum("ijk,ijk->ij", delta, delta)
        near = (partners >= 0) & (r2 < CUTOFF ** 2) & (r2 > 0)
        inv2 = np.where(near, 1 / np.where(near, r2, 1), 0)
        inv6 = inv2 ** 3
        force[chunk] = np.einsum("ij,ijk->ik", 24 * inv2 * (2 * inv6 ** 2 - inv6), delta)
        energy += 0.5 * (4 * (inv6 ** 2 - inv6) - SHIFT * near).sum()
    return force, energy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=5,
                        help="FCC cells per side (4 cells^3 atoms)")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--temperature", type=float, default=1.44)
    parser.add_argument("--thermo", type=int, default=20, help="steps between energy sums")
    parser.add_argument("--drift", type=float, default=1e-3,
                        help="largest energy change per atom still verified")
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()

    comm = coc.init()
    rank, size = comm.rank, comm.size
    grid = np.array(brick_grid(size))
    me = np.array(np.unravel_index(rank, grid))
    positions, velocities, side = lattice(args.cells, args.temperature, args.seed)
    atoms_total = len(positions)
    brick = side / grid
    if brick.min() < CUTOFF or side < 2 * CUTOFF:
        parser.error(f"bricks of {brick.min():.2f} sigma on {size} ranks are thinner than the "
                     f"cut-off {CUTOFF}: give more --cells")
    low, high = me * brick, (me + 1) * brick
    inside = (np.floor(positions / brick).astype(int) == me).all(axis=1)
    state = np.hstack((positions[inside], velocities[inside]))    # x y z vx vy vz per atom
    clock = Stopwatch()

    def neighbour(dim, step):
        """Return the rank of the brick ``step`` away along ``dim`` (periodic)."""
        coords = me.copy()
        coords[dim] = (coords[dim] + step) % grid[dim]
        return int(np.ravel_multi_index(coords, grid))

    def swap(rows, dest, source, tag):
        """Send ``rows`` to ``dest`` and return the rows ``source`` sends.

        The object form carries the array's shape with it (one message, the array's memory
        sent out of band), so no separate message of counts is needed.
        """
        with clock:
            return comm.sendrecv(rows, dest=dest, sendtag=tag, source=source, recvtag=tag)

    def migrate(state):
        """Send the atoms that left this brick towards their new one, x then y then z."""
        for dim in range(3):
            state[:, dim] %= side
            target = np.floor(state[:, dim] / brick[dim]).astype(int) % grid[dim]
            stay = target == me[dim]
            up = ~stay & (target == (me[dim] + 1) % grid[dim])
            down = ~stay & ~up
            from_below = swap(state[up], neighbour(dim, 1), neighbour(dim, -1), 10 * dim)
            from_above = swap(state[down], neighbour(dim, -1), neighbour(dim, 1), 10 * dim + 2)
            state = np.vstack((state[stay], from_below, from_above))
        return state

    def ghosts(positions):
        """Return copies of the atoms within the cut-off of this brick, periodic images shifted."""
        known = positions
        for dim in range(3):
            wrap = np.zeros(3)
            wrap[dim] = side
            to_low = known[known[:, dim] < low[dim] + CUTOFF] + (wrap if me[dim] == 0 else 0)
            to_high = known[known[:, dim] >= high[dim] - CUTOFF] \
                - (wrap if me[dim] == grid[dim] - 1 else 0)
            known = np.vstack((known,
                               swap(to_low, neighbour(dim, -1), neighbour(dim, 1), 10 * dim + 4),
                               swap(to_high, neighbour(dim, 1), neighbour(dim, -1), 10 * dim + 6)))
        return known[len(positions):]

    def energies(state, potential):
        """Return the (kinetic, potential) energy summed over all ranks."""
        with clock:
            return comm.allreduce(np.array([0.5 * (state[:, 3:] ** 2).sum(), potential]))

    force, potential = forces(state[:, :3], np.vstack((state[:, :3], ghosts(state[:, :3]))))
    start_energy = energies(state, potential).sum()
    drift = 0.0                                   # the largest energy change seen, per atom
    comm.Barrier()
    start = coc.Wtime()
    clock.reset()                                 # count the measured part only
    for step in range(1, args.steps + 1):
        state[:, 3:] += 0.5 * DT * force
        state[:, :3] += DT * state[:, 3:]
        state = migrate(state)
        force, potential = forces(state[:, :3], np.vstack((state[:, :3],
                                                            ghosts(state[:, :3]))))
        state[:, 3:] += 0.5 * DT * force
        if step % args.thermo == 0 or step == args.steps:
            kinetic, total_potential = energies(state, potential)
            drift = max(drift, abs(kinetic + total_potential - start_energy) / atoms_total)
    elapsed = coc.Wtime() - start

    count = comm.allreduce(len(state))
    momentum = np.abs(comm.allreduce(state[:, 3:].sum(axis=0))).max()
    verified = bool(count == atoms_total and momentum < 1e-9 * atoms_total
                    and drift < args.drift)
    # every application ends alike, on purpose: one call of coc.bench's report()
    report(comm, "md", f"{atoms_total} atoms, {args.steps} steps on {size} ranks "
           f"({' x '.join(map(str, grid))} bricks): temperature "
           f"{2 * kinetic / (3 * atoms_total - 3):.3f}, energy per atom "
           f"{start_energy / atoms_total:.5f} -> "
           f"{(kinetic + total_potential) / atoms_total:.5f} (drift {drift:.1e}), "
           f"{count} atoms, momentum {momentum:.1e}",
           verified=verified, elapsed=elapsed, stopwatch=clock, json_path=args.json,
           params=vars(args))


if __name__ == "__main__":
    main()
