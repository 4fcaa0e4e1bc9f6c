"""Solve a dense random linear system by blocked LU with partial pivoting, as HPL does.

The LINPACK application of the Chemnitz cluster-of-clusters paper (Balkanski, Trams, Rehm):
HPL factors a dense ``N`` x ``N`` matrix ``A = P L U`` by panels of ``nb`` columns and
solves ``A x = b``. Here the matrix is dealt out in column blocks round-robin over the
ranks (a 1 x p block-cyclic grid, HPL with P = 1), so each step

- the owner of panel ``k`` factors it (partial pivoting down the column, unblocked);
- ``Bcast`` sends the factored panel and its pivot rows to every rank (coc's multi-level
  broadcast: one copy crosses the gateways per step, whichever site owns the panel);
- every rank swaps the pivot rows in its trailing columns and in ``b``, solves for its part
  of the block row of ``U`` and updates its trailing columns (one matrix product).

``b`` rides along as HPL's extra column (every rank keeps a copy and eliminates it with the
broadcast panels), and the back substitution walks the blocks from last to first, passing
the partly solved right-hand side from each block's owner to the next one (``Send``/``Recv``).

It checks itself as HPL does: every rank regenerates its columns of ``A``, an ``Allreduce``
forms ``A x - b``, and the run is verified when the scaled residual
``|A x - b|_inf / (eps (|A|_inf |x|_inf + |b|_inf) N)`` is below 16.

Run: ``coc-run -n 8 python examples/hpl.py`` (N = 256, nb = 32; CI size).
Real size: ``coc-run -n 8 python examples/hpl.py --n 4096 --nb 64``.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # the ranks are the parallelism
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the BLAS thread settings)

import coc  # noqa: E402


class Stopwatch:
    """Add up the seconds spent inside ``with stopwatch:`` blocks (the communication calls)."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.started = coc.Wtime()

    def __exit__(self, *exc):
        self.seconds += coc.Wtime() - self.started


def column_block(n, nb, block, seed):
    """Return columns ``block*nb ...`` of the random matrix (uniform in [-0.5, 0.5))."""
    return np.random.default_rng([seed, block]).random((n, nb)) - 0.5


def right_hand_side(n, seed):
    """Return the right-hand side ``b`` (the same on every rank)."""
    return np.random.default_rng([seed, n]).random(n) - 0.5


def factor_panel(panel, first_row):
    """Factor ``panel`` (rows ``first_row``..N of nb columns) in place; return its pivot rows."""
    pivots = np.empty(panel.shape[1], np.int64)
    for i in range(panel.shape[1]):
        p = i + int(np.argmax(np.abs(panel[i:, i])))
        pivots[i] = first_row + p
        if p != i:
            panel[[i, p]] = panel[[p, i]]
        panel[i + 1:, i] /= panel[i, i]
        panel[i + 1:, i + 1:] -= np.outer(panel[i + 1:, i], panel[i, i + 1:])
    return pivots


def row_order(pivots, first_row, n):
    """Return the order of rows ``first_row``..N after the panel's swaps, as indices from 0."""
    order = np.arange(n - first_row)
    for i, p in enumerate(pivots - first_row):
        order[[i, p]] = order[[p, i]]
    return order


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="order of the matrix")
    parser.add_argument("--nb", type=int, default=32, help="block (panel) width")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()
    n, nb, seed = args.n, args.nb, args.seed
    if n % nb:
        parser.error(f"--n {n} is not a multiple of --nb {nb}")

    comm = coc.init()
    rank, size = comm.rank, comm.size
    blocks = n // nb
    mine = list(range(rank, blocks, size))           # global indices of my column blocks
    local = np.empty((n, nb * len(mine)))
    for i, block in enumerate(mine):
        local[:, i * nb:(i + 1) * nb] = column_block(n, nb, block, seed)
    b = right_hand_side(n, seed)
    pivots = np.empty(nb, np.int64)
    clock = Stopwatch()

    comm.Barrier()
    start = coc.Wtime()
    for k in range(blocks):                           # factorisation, b eliminated alongside
        top, owner = k * nb, k % size
        panel = np.empty((n - top, nb))
        if rank == owner:
            column = mine.index(k) * nb
            pivots[:] = factor_panel(local[top:, column:column + nb], top)
            panel[:] = local[top:, column:column + nb]
        with clock:
            comm.Bcast(panel, root=owner)
            comm.Bcast(pivots, root=owner)
        order = row_order(pivots, top, n)
        lower = np.tril(panel[:nb], -1) + np.eye(nb)
        trailing = local[:, sum(1 for block in mine if block <= k) * nb:]
        trailing[top:] = trailing[top:][order]
        trailing[top:top + nb] = np.linalg.solve(lower, trailing[top:top + nb])
        trailing[top + nb:] -= panel[nb:] @ trailing[top:top + nb]
        b[top:] = b[top:][order]
        b[top:top + nb] = np.linalg.solve(lower, b[top:top + nb])
        b[top + nb:] -= panel[nb:] @ b[top:top + nb]

    x_blocks = {}
    for k in reversed(range(blocks)):                 # back substitution, block by block
        top, owner = k * nb, k % size
        if rank != owner:
            continue
        if k + 1 < blocks and (k + 1) % size != rank:
            with clock:
                comm.Recv(b[:top + nb], source=(k + 1) % size, tag=k)
        column = mine.index(k) * nb
        x_blocks[k] = np.linalg.solve(np.triu(local[top:top + nb, column:column + nb]),
                                      b[top:top + nb])
        b[:top] -= local[:top, column:column + nb] @ x_blocks[k]
        if k > 0 and (k - 1) % size != rank:
            with clock:
                comm.Send(b[:top], dest=(k - 1) % size, tag=k - 1)
    elapsed = coc.Wtime() - start

    product, row_sums = np.zeros(n), np.zeros(n)     # check: regenerate my columns of A
    for block, x_block in x_blocks.items():
        original = column_block(n, nb, block, seed)
        product += original @ x_block
        row_sums += np.abs(original).sum(axis=1)
    ax, a_norm = np.empty(n), np.empty(n)
    comm.Allreduce(product, ax, op=coc.SUM)
    comm.Allreduce(row_sums, a_norm, op=coc.SUM)
    x_norm = comm.allreduce(max((np.abs(x).max() for x in x_blocks.values()), default=0.0),
                            op=coc.MAX)
    b = right_hand_side(n, seed)
    residual = np.abs(ax - b).max() / (np.finfo(float).eps * n *
                                       (a_norm.max() * x_norm + np.abs(b).max()))
    verified = bool(residual < 16)
    elapsed = comm.allreduce(elapsed, op=coc.MAX)
    comm_time = comm.allreduce(clock.seconds) / size
    if rank == 0:
        gflops = (2 / 3 * n ** 3 + 1.5 * n ** 2) / elapsed / 1e9
        print(f"hpl: N = {n}, nb = {nb} on {size} ranks: {gflops:.2f} Gflop/s, scaled residual "
              f"{residual:.3f} (< 16): {'verified' if verified else 'FAILED'}")
        print(f"hpl: time {elapsed:.3f} s, communication {comm_time:.3f} s "
              f"({100 * comm_time / elapsed:.1f} %)", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"time": elapsed, "comm_time": comm_time, "verified": verified,
                           "params": {**vars(args), "ranks": size, "gflops": gflops}}, out)
    comm.barrier()        # rank 0's report is out before a failed check ends the job
    if not verified:
        sys.exit(1)


if __name__ == "__main__":
    main()
