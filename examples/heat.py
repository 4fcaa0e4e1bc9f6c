"""Jacobi iteration of the 2-D heat equation on a grid of blocks, halos exchanged every step.

The stencil application of the LAMP cluster paper (Gołębiewski et al.): a grid with fixed
zero edges, each rank owning one block of a ``px`` x ``py`` process grid and one halo line
on every side. Each step every rank swaps its edge rows and columns with its four
neighbours (``Sendrecv`` of NumPy buffers; ``PROC_NULL`` at the outer edge), then replaces
every point by the mean of its four neighbours; every ``--check-every`` steps an
``Allreduce`` sums the squared change (the residual a solver would stop on).

Ranks are laid out row by row, so on ``two-sites`` (ranks 0-3 on site a, 4-7 on site b)
the sites meet along one line of the process grid and only that line's halos cross the
gateways.

It checks itself exactly: the start field is a sum of two discrete sine modes, and one
Jacobi step multiplies mode (p, q) by (cos(p pi/(n+1)) + cos(q pi/(n+1))) / 2, so after any
number of steps the field is known in closed form; the run is verified when every point is
within 1e-9 of it.

Run: ``coc-run -n 8 python examples/heat.py`` (128 x 128, 100 steps; CI size).
Real size: ``coc-run -n 8 python examples/heat.py --n 2048 --steps 500``.
"""

import argparse

import numpy as np

import coc
from coc.bench.application import Stopwatch, report


def process_grid(size):
    """Return the most nearly square ``(rows, columns)`` with ``rows * columns == size``."""
    rows = max(r for r in range(1, int(size ** 0.5) + 1) if size % r == 0)
    return rows, size // rows


def split(n, parts, index):
    """Return ``(first, count)`` of block ``index`` when ``n`` points are split in ``parts``."""
    base, extra = divmod(n, parts)
    return index * base + min(index, extra), base + (index < extra)


MODES = ((1, 1, 1.0), (3, 2, 0.5))          # (p, q, amplitude) of the start field


def exact(n, rows, cols, steps):
    """Return the field after ``steps`` Jacobi steps on the points ``rows`` x ``cols``."""
    field = np.zeros((len(rows), len(cols)))
    for p, q, amplitude in MODES:
        decay = ((np.cos(p * np.pi / (n + 1)) + np.cos(q * np.pi / (n + 1))) / 2) ** steps
        field += amplitude * decay * np.outer(np.sin(p * np.pi * rows / (n + 1)),
                                              np.sin(q * np.pi * cols / (n + 1)))
    return field


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=128, help="interior points per side")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--check-every", type=int, default=10,
                        help="steps between residual Allreduces")
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()

    comm = coc.init()
    rank, size = comm.rank, comm.size
    prows, pcols = process_grid(size)
    my_row, my_col = divmod(rank, pcols)
    if args.n < max(prows, pcols):
        parser.error(f"--n {args.n} is smaller than the {prows} x {pcols} process grid")
    row0, nrows = split(args.n, prows, my_row)
    col0, ncols = split(args.n, pcols, my_col)

    def neighbour(drow, dcol):
        """Return the rank of the block ``drow, dcol`` away (PROC_NULL past the edge)."""
        r, c = my_row + drow, my_col + dcol
        return r * pcols + c if 0 <= r < prows and 0 <= c < pcols else coc.PROC_NULL

    up, down, left, right = neighbour(-1, 0), neighbour(1, 0), neighbour(0, -1), neighbour(0, 1)
    # Global point indices run 1..n inside; 0 and n+1 are the fixed zero edges.
    u = np.zeros((nrows + 2, ncols + 2))
    u[1:-1, 1:-1] = exact(args.n, np.arange(row0 + 1, row0 + nrows + 1),
                          np.arange(col0 + 1, col0 + ncols + 1), 0)
    new = u.copy()
    send_col, recv_col = np.empty(nrows), np.empty(nrows)
    residual, local = np.zeros(1), np.zeros(1)
    clock = Stopwatch()

    def exchange_halos():
        """Swap edge rows and columns with the four neighbours, into their halo lines."""
        comm.Sendrecv(u[1, 1:-1], dest=up, sendtag=1, recvbuf=u[-1, 1:-1], source=down,
                      recvtag=1)
        comm.Sendrecv(u[-2, 1:-1], dest=down, sendtag=2, recvbuf=u[0, 1:-1], source=up,
                      recvtag=2)
        for dest, source, inner, outer, tag in ((left, right, 1, -1, 3), (right, left, -2, 0, 4)):
            send_col[:] = u[1:-1, inner]          # columns are strided: copy into a buffer
            comm.Sendrecv(send_col, dest=dest, sendtag=tag, recvbuf=recv_col, source=source,
                          recvtag=tag)
            if source != coc.PROC_NULL:
                u[1:-1, outer] = recv_col

    comm.Barrier()
    start = coc.Wtime()
    for step in range(1, args.steps + 1):
        with clock:
            exchange_halos()
        new[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        if step % args.check_every == 0:
            local[0] = ((new[1:-1, 1:-1] - u[1:-1, 1:-1]) ** 2).sum()
            with clock:
                comm.Allreduce(local, residual, op=coc.SUM)
        u, new = new, u
    elapsed = coc.Wtime() - start

    error = np.abs(u[1:-1, 1:-1] - exact(args.n, np.arange(row0 + 1, row0 + nrows + 1),
                                         np.arange(col0 + 1, col0 + ncols + 1), args.steps))
    max_error = comm.allreduce(float(error.max(initial=0.0)), op=coc.MAX)
    verified = bool(max_error < 1e-9)
    # every application ends alike, on purpose: one call of coc.bench's report()
    report(comm, "heat", f"{args.n} x {args.n} grid, {args.steps} steps on {size} ranks "
           f"({prows} x {pcols}): residual {residual[0]:.3e}, max error {max_error:.1e} "
           f"against the closed form",
           verified=verified, elapsed=elapsed, stopwatch=clock, json_path=args.json,
           params=vars(args))


if __name__ == "__main__":
    main()
