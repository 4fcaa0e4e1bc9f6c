/*
 * shm.c — single-producer/single-consumer byte rings in a memfd segment (see shm.h).
 *
 * Ordering: the producer copies bytes, then publishes head with release; the consumer
 * reads head with acquire, copies, then publishes tail with release. The doorbell is a
 * Dekker pair: the consumer stores asleep=1, fences, re-checks head; the producer
 * publishes head, fences, checks asleep. One of them always sees the other, so a reader
 * never sleeps on data and the writer rings only when the reader may be blocked. A
 * writer facing a full ring does the same with the `full` flag, the reader ringing it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "coc/coc.h"
#include "shm.h"

#define PAGE 4096u
#define ASLEEP_BELL 1u  /* the reader sleeps in a poller: ring the doorbell */
#define ASLEEP_NAP 2u   /* the reader sleeps on `asleep` itself (a futex): wake it there */

struct coc__ring_ctl {
    _Alignas(64) _Atomic uint64_t head;   /* producer's cache line */
    _Alignas(64) _Atomic uint64_t tail;   /* consumer's */
    _Alignas(64) _Atomic uint32_t asleep; /* consumer writes, producer reads (ASLEEP_*) */
    _Alignas(64) _Atomic uint32_t full;   /* producer writes (waits for room), consumer reads */
};

_Static_assert(sizeof(struct coc__ring_ctl) <= PAGE, "ring control fits a page");

static int size_ok(size_t size)
{
    return size >= COC__SHM_RING_MIN && size <= COC__SHM_RING_MAX && (size & (size - 1)) == 0;
}

size_t coc__shm_seg_len(size_t size)
{
    return 2 * (PAGE + size);
}

int coc__shm_create(size_t size)
{
    if (!size_ok(size))
        return COC_EINVAL;
    int fd = memfd_create("coc-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    /* sealed to its size: a peer cannot shrink it under our mapping (SIGBUS) */
    if (ftruncate(fd, (off_t)coc__shm_seg_len(size)) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int64_t coc__shm_ring_size(int fd)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK))
        return COC_EINVAL; /* only a memfd sealed against shrinking is safe to map */
    if (fstat(fd, &st) < 0)
        return -errno;
    size_t size = st.st_size >= 2 * PAGE ? (size_t)st.st_size / 2 - PAGE : 0;
    return size_ok(size) && coc__shm_seg_len(size) == (size_t)st.st_size ? (int64_t)size : COC_EINVAL;
}

int coc__ring_map(coc__ring *r, int fd, size_t size, int which)
{
    if (!size_ok(size) || (which != 0 && which != 1))
        return COC_EINVAL;
    void *p = mmap(NULL, PAGE + size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                   (off_t)(which * (PAGE + size)));
    if (p == MAP_FAILED)
        return -errno;
    r->ctl = p;
    r->data = (uint8_t *)p + PAGE;
    r->size = size;
    return 0;
}

void coc__ring_unmap(coc__ring *r)
{
    if (r->ctl)
        munmap(r->ctl, PAGE + r->size);
    r->ctl = NULL;
    r->data = NULL;
}

/* Copy n bytes into the ring at stream position pos (wrapping). */
static void put(coc__ring *r, uint64_t pos, const uint8_t *src, size_t n)
{
    size_t at = (size_t)(pos & (r->size - 1));
    size_t first = r->size - at < n ? r->size - at : n;
    memcpy(r->data + at, src, first);
    memcpy(r->data, src + first, n - first);
}

size_t coc__ring_write(coc__ring *r, const struct iovec *iov, int cnt, int *bell)
{
    struct coc__ring_ctl *c = r->ctl;
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
    size_t room = r->size - (size_t)(head - tail);
    size_t done = 0;
    for (int i = 0; i < cnt && done < room; i++) {
        size_t n = iov[i].iov_len < room - done ? iov[i].iov_len : room - done;
        put(r, head + done, iov[i].iov_base, n);
        done += n;
    }
    *bell = 0;
    if (!done)
        return 0;
    atomic_store_explicit(&c->head, head + done, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&c->asleep, memory_order_relaxed)) {
        uint32_t was = atomic_exchange(&c->asleep, 0); /* one ring per sleep */
        if (was == ASLEEP_NAP) /* shared, not private: the reader is another process */
            syscall(SYS_futex, &c->asleep, FUTEX_WAKE, 1, NULL, NULL, 0);
        *bell = was == ASLEEP_BELL;
    }
    return done;
}

size_t coc__ring_avail(const coc__ring *r)
{
    uint64_t head = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
    return (size_t)(head - atomic_load_explicit(&r->ctl->tail, memory_order_relaxed));
}

int coc__ring_want_room(coc__ring *r)
{
    struct coc__ring_ctl *c = r->ctl;
    atomic_store_explicit(&c->full, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t used = atomic_load_explicit(&c->head, memory_order_relaxed) -
                    atomic_load_explicit(&c->tail, memory_order_acquire);
    if (used < r->size) {
        atomic_store_explicit(&c->full, 0, memory_order_relaxed);
        return 1;
    }
    return 0;
}

size_t coc__ring_read(coc__ring *r, void *dst, size_t max, int *bell)
{
    struct coc__ring_ctl *c = r->ctl;
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    size_t n = coc__ring_avail(r);
    if (n > max)
        n = max;
    *bell = 0;
    if (!n)
        return 0;
    size_t at = (size_t)(tail & (r->size - 1));
    size_t first = r->size - at < n ? r->size - at : n;
    memcpy(dst, r->data + at, first);
    memcpy((uint8_t *)dst + first, r->data, n - first);
    atomic_store_explicit(&c->tail, tail + n, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&c->full, memory_order_relaxed))
        *bell = atomic_exchange(&c->full, 0) != 0;
    return n;
}

int coc__ring_sleep(coc__ring *r)
{
    atomic_store_explicit(&r->ctl->asleep, ASLEEP_BELL, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (coc__ring_avail(r)) {
        atomic_store_explicit(&r->ctl->asleep, 0, memory_order_relaxed);
        return 1;
    }
    return 0;
}

void coc__ring_wake(coc__ring *r)
{
    atomic_store_explicit(&r->ctl->asleep, 0, memory_order_relaxed);
}

int coc__ring_waits_room(const coc__ring *r)
{
    return atomic_load_explicit(&r->ctl->full, memory_order_relaxed) != 0;
}

int coc__ring_nap(coc__ring *r, int timeout_ms)
{
    struct coc__ring_ctl *c = r->ctl;
    atomic_store_explicit(&c->asleep, ASLEEP_NAP, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    if (!coc__ring_avail(r)) {
        struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
        syscall(SYS_futex, &c->asleep, FUTEX_WAIT, ASLEEP_NAP, &ts, NULL, 0);
    }
    atomic_store_explicit(&c->asleep, 0, memory_order_relaxed);
    return coc__ring_avail(r) != 0;
}
