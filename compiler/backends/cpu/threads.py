"""The generated library's thread pool: `lum_parallel(n, grain, part, ...)`.

A parallel kernel is written as a part function over a range of its outer loop,
`int part(lo, hi, arena, weights, inputs, outputs)`, and `lum_parallel` cuts [0, n) into
chunks that the caller and the pool's workers claim one at a time.  The caller works too
and waits only for chunks already claimed: a worker that is not running (the machine is
shared, or the cores are busy with another library's spinning threads) never holds a
kernel up, it simply claims nothing.  OpenMP's parallel regions end in a barrier that
every thread of the team must reach, so one descheduled thread stalled the whole region
for a scheduler time slice: on the shared 2-core benchmark machine gpt ran at 13 ms
quiet but 90-180 ms with one other busy process, against ONNX Runtime's 13 and 39 ms.

Workers spin for `LUM_SPIN_NS` (200 us) after their last chunk (the next kernel of the
same run comes within microseconds) and then sleep on a condition variable.  A caller
whose last chunks run on other threads spins `LUM_WAIT_SPIN_NS` (20 us) and then sleeps
until they finish: a spinning caller would keep its core from the very thread it waits
for, when that thread shares a core with another process.  Threads: the CPUs
this process may run on, or `$LUMINAL_NUM_THREADS`, else `$OMP_NUM_THREADS`; the pool
starts on the first parallel kernel.  One caller at a time uses the pool; a concurrent
caller (another Python thread running the same model) runs its kernels on its own thread.
A forked child has no workers and runs every chunk itself.

A claim is a compare-and-swap on one 64-bit ticket, the job's generation in the high
half and its next chunk in the low half, so a worker that wakes late can never claim a
chunk of a newer job with an older job's description.
"""

from __future__ import annotations

#: How many chunks per thread an automatic grain aims for: enough that a thread that
#: falls behind leaves work for the others, few enough that claims stay cheap.
CHUNKS_PER_THREAD = 4

POOL = r"""
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifndef LUM_SPIN_NS
#define LUM_SPIN_NS 200000
#endif
#ifndef LUM_WAIT_SPIN_NS
#define LUM_WAIT_SPIN_NS 20000
#endif
#if defined(__x86_64__) || defined(__i386__)
#define LUM_PAUSE() __builtin_ia32_pause()
#else
#define LUM_PAUSE() ((void)0)
#endif
typedef int (*lum_part_fn)(int64_t, int64_t, uint8_t *, const uint8_t *, void *const *, void *const *);
static struct {
    lum_part_fn fn;
    uint8_t *arena;
    const uint8_t *weights;
    void *const *inputs;
    void *const *outputs;
    int64_t n, grain, chunks;
    _Atomic uint64_t ticket; /* generation << 32 | next chunk */
    _Atomic int64_t done;
    _Atomic int err;
    _Atomic int busy;
    _Atomic int sleepers;
    _Atomic int waiting; /* the caller sleeps until the last chunk is done */
    int threads;
    pthread_mutex_t mu;
    pthread_cond_t cv, finished;
    pthread_once_t once;
} lum_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
              .finished = PTHREAD_COND_INITIALIZER, .once = PTHREAD_ONCE_INIT};

static int64_t lum_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claim and run chunks of generation `gen` (described by the caller's copy of the job). */
static void lum_work(uint64_t gen, lum_part_fn fn, int64_t n, int64_t grain, int64_t chunks,
                     uint8_t *a, const uint8_t *w, void *const *in, void *const *out) {
    for (;;) {
        uint64_t t = atomic_load_explicit(&lum_pool.ticket, memory_order_acquire);
        if ((t >> 32) != gen || (int64_t)(t & 0xffffffffu) >= chunks) return;
        if (!atomic_compare_exchange_weak_explicit(&lum_pool.ticket, &t, t + 1,
                                                   memory_order_acq_rel, memory_order_acquire))
            continue;
        const int64_t lo = (int64_t)(t & 0xffffffffu) * grain;
        const int64_t hi = lo + grain < n ? lo + grain : n;
        const int e = fn(lo, hi, a, w, in, out);
        if (e) atomic_fetch_or_explicit(&lum_pool.err, e, memory_order_relaxed);
        if (atomic_fetch_add(&lum_pool.done, 1) + 1 == chunks && atomic_load(&lum_pool.waiting)) {
            pthread_mutex_lock(&lum_pool.mu);
            pthread_cond_broadcast(&lum_pool.finished);
            pthread_mutex_unlock(&lum_pool.mu);
        }
    }
}

static void *lum_worker(void *arg) {
    (void)arg;
    /* Generation 0 is "no job yet": the pool starts inside the first job's lum_threads(),
       before that job is published, so a worker that starts after the publication still
       takes part in it (reading the ticket here instead, it waited for the next job). */
    uint64_t seen = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&lum_pool.ticket, memory_order_acquire);
        if ((t >> 32) == seen) {
            const int64_t until = lum_ns() + LUM_SPIN_NS;
            for (int spins = 1; (t >> 32) == seen; spins++) {
                LUM_PAUSE();
                if ((spins & 255) == 0) {
                    if (lum_ns() > until) break;
                    sched_yield();
                }
                t = atomic_load_explicit(&lum_pool.ticket, memory_order_acquire);
            }
            if ((t >> 32) == seen) {
                atomic_fetch_add(&lum_pool.sleepers, 1);
                pthread_mutex_lock(&lum_pool.mu);
                while (((t = atomic_load(&lum_pool.ticket)) >> 32) == seen)
                    pthread_cond_wait(&lum_pool.cv, &lum_pool.mu);
                pthread_mutex_unlock(&lum_pool.mu);
                atomic_fetch_sub(&lum_pool.sleepers, 1);
            }
        }
        seen = t >> 32;
        /* the job's fields were written before its ticket was published (release) */
        lum_work(seen, lum_pool.fn, lum_pool.n, lum_pool.grain, lum_pool.chunks, lum_pool.arena,
                 lum_pool.weights, lum_pool.inputs, lum_pool.outputs);
    }
    return 0;
}

static int lum_env_int(const char *name) {
    const char *s = getenv(name);
    return s && atoi(s) > 0 ? atoi(s) : 0;
}

static void lum_pool_start(void) {
    int n = lum_env_int("LUMINAL_NUM_THREADS");
    if (!n) n = lum_env_int("OMP_NUM_THREADS");
#ifdef CPU_COUNT
    if (!n) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    }
#endif
    if (!n) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > 256) n = 256;
    int started = 1;
    for (int k = 1; k < n; k++) {
        pthread_t th;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, lum_worker, 0) == 0) started++;
        pthread_attr_destroy(&attr);
    }
    lum_pool.threads = started;
}

static int lum_threads(void) {
    pthread_once(&lum_pool.once, lum_pool_start);
    return lum_pool.threads;
}

/* Run part(lo, hi, ...) over [0, n) in chunks of `grain` items (0: about
   LUM_CHUNKS_PER_THREAD chunks per thread). */
static int lum_parallel(int64_t n, int64_t grain, lum_part_fn fn, uint8_t *a, const uint8_t *w,
                        void *const *in, void *const *out) {
    if (n <= 0) return 0;
    const int threads = lum_threads();
    if (grain <= 0) grain = (n + LUM_CHUNKS_PER_THREAD * threads - 1) / (LUM_CHUNKS_PER_THREAD * threads);
    const int64_t chunks = (n + grain - 1) / grain;
    if (threads == 1 || chunks == 1 || chunks > 0x7fffffff || atomic_exchange(&lum_pool.busy, 1))
        return fn(0, n, a, w, in, out);
    lum_pool.fn = fn;
    lum_pool.arena = a;
    lum_pool.weights = w;
    lum_pool.inputs = in;
    lum_pool.outputs = out;
    lum_pool.n = n;
    lum_pool.grain = grain;
    lum_pool.chunks = chunks;
    atomic_store_explicit(&lum_pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&lum_pool.err, 0, memory_order_relaxed);
    const uint64_t gen = (atomic_load(&lum_pool.ticket) >> 32) + 1;
    atomic_store(&lum_pool.ticket, gen << 32); /* publishes the job (seq_cst) */
    if (atomic_load(&lum_pool.sleepers) > 0) {
        pthread_mutex_lock(&lum_pool.mu);
        pthread_cond_broadcast(&lum_pool.cv);
        pthread_mutex_unlock(&lum_pool.mu);
    }
    lum_work(gen, fn, n, grain, chunks, a, w, in, out);
    /* chunks still running elsewhere: spin a little, then sleep so that this core is
       free for the thread running them (it may be sharing a core with another process) */
    const int64_t until = lum_ns() + LUM_WAIT_SPIN_NS;
    for (int spins = 1; atomic_load_explicit(&lum_pool.done, memory_order_acquire) < chunks; spins++) {
        LUM_PAUSE();
        if ((spins & 255) == 0 && lum_ns() > until) {
            pthread_mutex_lock(&lum_pool.mu);
            atomic_store(&lum_pool.waiting, 1);
            while (atomic_load(&lum_pool.done) < chunks) pthread_cond_wait(&lum_pool.finished, &lum_pool.mu);
            atomic_store(&lum_pool.waiting, 0);
            pthread_mutex_unlock(&lum_pool.mu);
        }
    }
    const int err = atomic_load(&lum_pool.err);
    atomic_store(&lum_pool.busy, 0);
    return err;
}
""".replace("LUM_CHUNKS_PER_THREAD", str(CHUNKS_PER_THREAD))
