"""Find the four smallest eigenvalues of a distributed sparse matrix with the Lanczos method.

The eigen-solver of the LAMP cluster paper (Gołębiewski et al.), whose JADA package found the
four smallest eigenpairs of large sparse symmetric matrices by matrix and vector partitioning:
non-blocking point-to-point messages inside the sparse matrix-vector product, grouped inner
products reduced with one ``Allreduce``. Here the matrix is the anisotropic 5-point Laplacian
of an ``m`` x ``m`` grid (``n = m*m`` unknowns, coefficient 1 along grid columns, ``--cy``
along rows), split over the ranks in blocks of grid rows. Each Lanczos step

- multiplies by the matrix: ``Isend``/``Irecv`` of the two boundary grid rows, the interior
  computed while they travel, the boundary rows finished after ``waitall``;
- reorthogonalises the new vector against all earlier ones (classical Gram-Schmidt, twice):
  each pass is one ``Allreduce`` of all the step's inner products at once, the second one
  carrying the vector's norm too (two ``Allreduce`` calls a step in all).

Every 10 steps all ranks compute the Ritz values of the small tridiagonal matrix and stop
when the residual bounds of the four smallest are below ``--tol`` (relative).

It checks itself against the known spectrum: the eigenvalues of this matrix are
``2 - 2 cos(p pi/(m+1)) + cy (2 - 2 cos(q pi/(m+1)))``; the run is verified when the four
smallest Ritz values match the four smallest of these within 1e-8 (relative to the largest).

Run: ``coc-run -n 8 python examples/lanczos.py`` (m = 24, n = 576; CI size).
Real size: ``coc-run -n 8 python examples/lanczos.py --m 96`` (n = 9216, about 500 steps).
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # the ranks are the parallelism
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402 (after the BLAS thread settings)

import coc  # noqa: E402
from coc.bench.application import Stopwatch, report  # noqa: E402


WANTED = 4                                    # eigenvalues sought, as JADA's run


def known_eigenvalues(m, cy):
    """Return the smallest ``WANTED`` eigenvalues of the anisotropic grid Laplacian."""
    one_d = 2 - 2 * np.cos(np.arange(1, m + 1) * np.pi / (m + 1))
    return np.sort((one_d[:, None] + cy * one_d[None, :]).reshape(-1))[:WANTED]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=24, help="grid points per side (n = m*m)")
    parser.add_argument("--cy", type=float, default=2 ** 0.5 / 2,
                        help="coupling along grid rows (irrational: no repeated eigenvalues)")
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--max-steps", type=int, help="give up after this many (default n)")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()

    comm = coc.init()
    rank, size, m, cy = comm.rank, comm.size, args.m, args.cy
    if m < size:
        parser.error(f"--m {m} gives fewer grid rows than the {size} ranks")
    first = rank * m // size
    rows = (rank + 1) * m // size - first
    up = rank - 1 if rank > 0 else coc.PROC_NULL
    down = rank + 1 if rank < size - 1 else coc.PROC_NULL
    halo_up, halo_down = np.zeros(m), np.zeros(m)
    clock = Stopwatch()

    def matvec(x, y):
        """Store the matrix times ``x`` into ``y`` (both this rank's grid rows, flattened)."""
        x, y = x.reshape(rows, m), y.reshape(rows, m)
        with clock:
            requests = [comm.Irecv(halo_up, up, tag=1), comm.Irecv(halo_down, down, tag=2),
                        comm.Isend(x[0], up, tag=2), comm.Isend(x[-1], down, tag=1)]
        y[:] = (2 + 2 * cy) * x
        y[:, 1:] -= cy * x[:, :-1]
        y[:, :-1] -= cy * x[:, 1:]
        y[1:] -= x[:-1]
        y[:-1] -= x[1:]
        with clock:
            coc.waitall(requests)
        y[0] -= halo_up
        y[-1] -= halo_down

    def dot(local_products):
        """Return the global inner products from this rank's share (one Allreduce)."""
        total = np.empty_like(local_products)
        with clock:
            comm.Allreduce(local_products, total, op=coc.SUM)
        return total

    max_steps = min(args.max_steps or m * m, m * m)
    basis = np.empty((max_steps + 1, rows * m))
    start_vector = np.random.default_rng(args.seed).random(m * m)[first * m:(first + rows) * m]
    basis[0] = start_vector / np.sqrt(dot(np.array([start_vector @ start_vector]))[0])
    alpha, beta, w = [], [], np.empty(rows * m)
    ritz, converged = np.zeros(WANTED), False

    comm.Barrier()
    start = coc.Wtime()
    clock.reset()                                 # count the measured part only
    for step in range(max_steps):
        matvec(basis[step], w)
        previous = basis[:step + 1]
        h = dot(previous @ w)
        w -= previous.T @ h
        # Gram-Schmidt again keeps the basis orthogonal; the norm rides in the same Allreduce
        # (w's second correction is tiny, so |w - V h2|^2 = w.w - h2.h2 to rounding).
        products = dot(np.append(previous @ w, w @ w))
        h2, squared_norm = products[:-1], products[-1]
        w -= previous.T @ h2
        alpha.append(h[step] + h2[step])
        beta.append(np.sqrt(squared_norm - np.dot(h2, h2)))
        basis[step + 1] = w / beta[-1]
        if (step + 1) % 10 == 0 or step + 1 == max_steps:
            tridiagonal = np.diag(alpha) + np.diag(beta[:-1], 1) + np.diag(beta[:-1], -1)
            values, vectors = np.linalg.eigh(tridiagonal)
            ritz = values[:WANTED]
            bounds = np.abs(beta[-1] * vectors[-1, :WANTED])
            if len(values) >= WANTED and (bounds < args.tol * values[-1]).all():
                converged = True
                break
    elapsed = coc.Wtime() - start

    expected = known_eigenvalues(m, cy)
    error = float(np.abs(ritz - expected).max() / (4 + 4 * cy)) if len(ritz) == WANTED else 1.0
    verified = bool(converged and error < 1e-8)
    # every application ends alike, on purpose: one call of coc.bench's report()
    report(comm, "lanczos", f"n = {m * m} ({m} x {m} grid) on {size} ranks, {step + 1} steps"
           f"{'' if converged else ' (not converged)'}: smallest eigenvalues "
           f"{', '.join(f'{v:.10f}' for v in ritz)}, relative error {error:.1e} "
           f"against the known spectrum",
           verified=verified, elapsed=elapsed, stopwatch=clock, json_path=args.json,
           params=vars(args))


if __name__ == "__main__":
    main()
