"""Master and workers: rank 0 hands out tasks and takes results from ``ANY_SOURCE``.

``MPI.Status`` tells the master which worker answered and what it sent. Run:
``mpiexec -n 4 python master_worker.py`` or ``coc-run --mpi4py -n 4 python master_worker.py``.
"""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
TASKS, WORK, STOP = 40, 1, 2


def work(task):
    return sum(i * i for i in range(task + 1))


if rank == 0:
    results, status = {}, MPI.Status()
    tasks = iter(range(TASKS))
    busy = 0

    def hand_out(worker):
        """Send the next task to ``worker``, or tell it to stop; return 1 if it got a task."""
        task = next(tasks, None)
        comm.send(task, dest=worker, tag=STOP if task is None else WORK)
        return task is not None

    for worker in range(1, size):             # one task to each worker to start
        busy += hand_out(worker)
    while busy:
        task, value = comm.recv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        worker = status.Get_source()
        assert status.Get_tag() == WORK and value == work(task), (worker, task, value)
        results[task] = value
        busy += hand_out(worker) - 1
    for task in tasks:                        # no workers: the master works alone
        results[task] = work(task)
    print(f"{len(results)} tasks done, checksum {sum(results.values())}")
else:
    status = MPI.Status()
    while True:
        task = comm.recv(source=0, tag=MPI.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            break
        comm.send((task, work(task)), dest=0, tag=WORK)
