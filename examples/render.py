"""Ray-trace an image master-worker style: rank 0 hands out bands of rows, the workers render.

The rendering application of the Chemnitz cluster-of-clusters paper (Balkanski, Trams,
Rehm), which ran MPI-POV-Ray: one master distributes the work and collects the image, the
workers trace rays, and the master talks to one worker at a time. Here the scene is a few
reflecting spheres over a chequered floor under one light (shadows, Phong highlights and two
bounces of reflection), traced with NumPy a band of rows at a time. The master (rank 0,
which renders nothing) sends a band number to each worker, then takes finished bands from
``ANY_SOURCE`` (``Recv`` of NumPy buffers, ``Status`` naming the worker and the band)
and answers each with the next band, so fast workers and workers near the master's site
take more bands.

It checks itself: after the timed run the master renders the whole image again by itself,
band by band, and the run is verified when the SHA-256 of both images is the same.

Run: ``coc-run -n 8 python examples/render.py`` (160 x 120 pixels; CI size).
Real size: ``coc-run -n 8 python examples/render.py --width 2048 --height 1536``.
``--output image.ppm`` saves the picture.
"""

import argparse
import hashlib
import json
import sys

import numpy as np

import coc


class Stopwatch:
    """Add up the seconds spent inside ``with stopwatch:`` blocks (the communication calls)."""

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.started = coc.Wtime()

    def __exit__(self, *exc):
        self.seconds += coc.Wtime() - self.started


# The scene: spheres (centre x, y, z, radius), their colours and reflectivities; a floor
# at y = 0; one point light; the camera at EYE looking along +z.
SPHERES = np.array([[0.0, 1.0, 3.0, 1.0], [-2.2, 0.7, 4.0, 0.7], [2.0, 0.5, 2.2, 0.5],
                    [0.9, 0.3, 1.2, 0.3], [-1.0, 2.6, 6.0, 1.1]])
COLOURS = np.array([[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.2, 0.4, 0.9], [0.9, 0.8, 0.2],
                    [0.8, 0.8, 0.8]])
REFLECTIVITY = np.array([0.3, 0.2, 0.4, 0.1, 0.6, 0.15])     # the last one is the floor
LIGHT = np.array([-4.0, 7.0, -2.0])
EYE = np.array([0.0, 1.4, -3.5])
FLOOR, BOUNCES, EPSILON = len(SPHERES), 2, 1e-6


def nearest_hit(origins, directions):
    """Return the distance to the nearest object along each ray and which object it is."""
    offset = origins[:, None, :] - SPHERES[None, :, :3]
    half_b = np.einsum("kij,kj->ki", offset, directions)
    c = np.einsum("kij,kij->ki", offset, offset) - SPHERES[:, 3] ** 2
    root = np.sqrt(np.maximum(half_b ** 2 - c, 0.0))
    t_spheres = np.where((half_b ** 2 > c) & (-half_b - root > EPSILON), -half_b - root, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where(directions[:, 1] < 0, -origins[:, 1] / directions[:, 1], np.inf)
    t = np.column_stack((t_spheres, np.where(t_floor > EPSILON, t_floor, np.inf)))
    which = np.argmin(t, axis=1)
    return t[np.arange(len(t)), which], which


def trace(origins, directions, bounces):
    """Return the colour seen along each ray (rows of RGB in 0..1)."""
    t, which = nearest_hit(origins, directions)
    sky = np.outer(0.5 + 0.5 * np.clip(directions[:, 1], 0, 1), [0.5, 0.7, 1.0])
    colour = sky.copy()
    hit = np.isfinite(t)
    if not hit.any():
        return colour
    o, d, obj = origins[hit], directions[hit], which[hit]
    point = o + t[hit, None] * d
    on_floor = obj == FLOOR
    normal = np.where(on_floor[:, None], [0.0, 1.0, 0.0],
                      (point - SPHERES[np.minimum(obj, FLOOR - 1), :3])
                      / SPHERES[np.minimum(obj, FLOOR - 1), 3][:, None])
    chequer = (np.floor(point[:, 0]) + np.floor(point[:, 2])) % 2
    base = np.where(on_floor[:, None], (0.25 + 0.6 * chequer)[:, None] * np.ones(3),
                    COLOURS[np.minimum(obj, FLOOR - 1)])
    to_light = LIGHT - point
    light_distance = np.linalg.norm(to_light, axis=1)
    to_light /= light_distance[:, None]
    start = point + 1e-4 * normal
    shadow_t, _ = nearest_hit(start, to_light)
    lit = shadow_t > light_distance
    diffuse = np.maximum(np.einsum("ij,ij->i", normal, to_light), 0.0) * lit
    mirror = d - 2 * np.einsum("ij,ij->i", d, normal)[:, None] * normal
    specular = np.maximum(np.einsum("ij,ij->i", mirror, to_light), 0.0) ** 40 * lit
    shade = base * (0.1 + 0.9 * diffuse[:, None]) + specular[:, None]
    if bounces:
        reflect = REFLECTIVITY[obj][:, None]
        shade = (1 - reflect) * shade + reflect * trace(start, mirror, bounces - 1)
    colour[hit] = shade
    return colour


def render_band(first_row, rows, width, height):
    """Return rows ``first_row``.. of the image as 8-bit RGB, shape (rows, width, 3)."""
    aspect = width / height
    y, x = np.mgrid[first_row:first_row + rows, 0:width]
    screen = np.stack(((2 * (x + 0.5) / width - 1) * aspect, 1 - 2 * (y + 0.5) / height,
                       np.full(x.shape, 1.5)), axis=-1).reshape(-1, 3)
    directions = screen / np.linalg.norm(screen, axis=1)[:, None]
    origins = np.broadcast_to(EYE, directions.shape)
    colour = trace(origins, directions, BOUNCES)
    return (np.clip(colour, 0, 1) * 255 + 0.5).astype(np.uint8).reshape(rows, width, 3)


WORK, STOP = 1, 2                               # tags of the master's messages


def master(comm, args, image, clock):
    """Hand out bands to the workers and place the finished ones into ``image``."""
    bands = iter(range(args.height // args.band))
    band_no, status = np.empty(1, np.int64), coc.Status()
    finished = np.empty((args.band, args.width, 3), np.uint8)
    busy = 0

    def hand_out(worker):
        """Send the next band to ``worker`` or tell it to stop; return 1 if it got work."""
        band_no[0] = next(bands, -1)
        with clock:
            comm.Send(band_no, dest=worker, tag=WORK if band_no[0] >= 0 else STOP)
        return int(band_no[0] >= 0)

    for worker in range(1, comm.size):
        busy += hand_out(worker)
    while busy:
        with clock:
            comm.Recv(finished, source=coc.ANY_SOURCE, tag=coc.ANY_TAG, status=status)
        image[status.Get_tag() * args.band:][:args.band] = finished
        busy += hand_out(status.Get_source()) - 1
    for band in bands:                          # no workers: the master renders alone
        image[band * args.band:][:args.band] = render_band(band * args.band, args.band,
                                                             args.width, args.height)


def worker(comm, args, clock):
    """Render the bands the master sends until it says stop."""
    band_no, status = np.empty(1, np.int64), coc.Status()
    while True:
        with clock:
            comm.Recv(band_no, source=0, tag=coc.ANY_TAG, status=status)
        if status.Get_tag() == STOP:
            return
        pixels = render_band(int(band_no[0]) * args.band, args.band, args.width, args.height)
        with clock:
            comm.Send(pixels, dest=0, tag=int(band_no[0]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=120)
    parser.add_argument("--band", type=int, default=4, help="rows per piece of work")
    parser.add_argument("--output", help="save the image here (binary PPM)")
    parser.add_argument("--json", help="write {time, comm_time, verified, params} here")
    args = parser.parse_args()
    if args.height % args.band:
        parser.error(f"--height {args.height} is not a multiple of --band {args.band}")

    comm = coc.init()
    clock = Stopwatch()
    image = np.zeros((args.height, args.width, 3), np.uint8)
    comm.Barrier()
    start = coc.Wtime()
    if comm.rank == 0:
        master(comm, args, image, clock)
    else:
        worker(comm, args, clock)
    elapsed = coc.Wtime() - start

    verified = True
    if comm.rank == 0:
        serial = np.concatenate([render_band(row, args.band, args.width, args.height)
                                 for row in range(0, args.height, args.band)])
        checksum = hashlib.sha256(image.tobytes()).hexdigest()
        verified = checksum == hashlib.sha256(serial.tobytes()).hexdigest()
        if args.output:
            with open(args.output, "wb") as out:
                out.write(b"P6 %d %d 255\n" % (args.width, args.height) + image.tobytes())
    verified = comm.bcast(verified, root=0)
    elapsed = comm.allreduce(elapsed, op=coc.MAX)
    comm_time = comm.allreduce(clock.seconds) / comm.size
    if comm.rank == 0:
        print(f"render: {args.width} x {args.height} pixels in bands of {args.band} rows, "
              f"{comm.size - 1} workers: sha256 {checksum[:16]} "
              f"{'equals' if verified else 'differs from'} the serial render: "
              f"{'verified' if verified else 'FAILED'}")
        print(f"render: time {elapsed:.3f} s, communication {comm_time:.3f} s "
              f"({100 * comm_time / elapsed:.1f} %)", flush=True)
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"time": elapsed, "comm_time": comm_time, "verified": verified,
                           "params": {**vars(args), "ranks": comm.size}}, out)
    comm.barrier()        # rank 0's report is out before a failed check ends the job
    if not verified:
        sys.exit(1)


if __name__ == "__main__":
    main()
