/* The libpmemblk side of scripts/bench-block: PMDK's user-space BTT (a peer nobody here wrote),
 * driven by the same loop as `heterarchy loadgen block --staging none` drives ours: THREADS
 * threads, each writing (or reading) uniformly random 4 KiB blocks for SECONDS, one call at a
 * time, timing each call as ours does. Prints one line: ops, seconds, ops per second.
 *
 *   pmemblk_bench PATH SIZE_MIB THREADS SECONDS write|read
 *
 * Run with PMEM_IS_PMEM_FORCE=1 on a file in /dev/shm so that libpmemblk flushes cache lines
 * (as ours does with the same variable) rather than calling msync. Written for this project.
 */
#include <libpmemblk.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 4096

static PMEMblkpool *pool;
static long long blocks;
static int writing;
static volatile int stop;

struct job {
    uint64_t state;
    long long ops;
};

static uint64_t next_random(uint64_t *state) {
    /* SplitMix64, as the Rust load generator. */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *run(void *arg) {
    struct job *job = arg;
    char *buf = aligned_alloc(64, BLOCK);
    memset(buf, 0x5a, BLOCK);
    volatile double spent = 0;
    while (!stop) {
        long long block = (long long)(next_random(&job->state) % (uint64_t)blocks);
        double start = now();
        int rc = writing ? pmemblk_write(pool, buf, block) : pmemblk_read(pool, buf, block);
        if (rc != 0) {
            perror("pmemblk");
            exit(1);
        }
        spent += now() - start;
        job->ops++;
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s PATH SIZE_MIB THREADS SECONDS write|read\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    size_t size = (size_t)atoll(argv[2]) << 20;
    int threads = atoi(argv[3]);
    double seconds = atof(argv[4]);
    writing = strcmp(argv[5], "write") == 0;
    pool = pmemblk_open(path, BLOCK);
    if (pool == NULL)
        pool = pmemblk_create(path, BLOCK, size, 0600);
    if (pool == NULL) {
        perror("pmemblk_create");
        return 1;
    }
    blocks = (long long)pmemblk_nblock(pool);
    if (!writing) {
        /* Reads of written blocks, as after ours writes them. */
        char *buf = aligned_alloc(64, BLOCK);
        memset(buf, 0x5a, BLOCK);
        for (long long block = 0; block < blocks; block++)
            pmemblk_write(pool, buf, block);
        free(buf);
    }
    pthread_t ids[256];
    struct job jobs[256];
    if (threads < 1 || threads > 256)
        return 2;
    double begin = now();
    for (int i = 0; i < threads; i++) {
        jobs[i].state = 1 ^ ((uint64_t)(i + 1) * 0xD1B54A32D192ED03ULL);
        jobs[i].ops = 0;
        pthread_create(&ids[i], NULL, run, &jobs[i]);
    }
    struct timespec wait = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&wait, NULL);
    stop = 1;
    long long ops = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ids[i], NULL);
        ops += jobs[i].ops;
    }
    double elapsed = now() - begin;
    printf("%lld %.3f %.0f\n", ops, elapsed, ops / elapsed);
    pmemblk_close(pool);
    return 0;
}
