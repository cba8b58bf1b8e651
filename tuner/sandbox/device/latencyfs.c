/* latencyfs: one file, "disk.img", served from a backing file with a delay before every read.
 *
 * tuner's sandbox attaches its loop device (losetup --direct-io=on) to this file to emulate a disk whose reads
 * are slow: network-attached block storage (each read waits LATENCY_US, many wait at once: the delay is a
 * sleep in the libfuse worker thread that serves the read, so reads in flight overlap), or one spindle (--hdd:
 * reads wait one after another under a lock, for a seek that grows with the distance from the previous read).
 *
 * The write side, switched on by SIGUSR1 once the sandbox is loaded (loading at a capped rate would only make
 * set-up slow): --flush-us N makes every flush wait N (the loop device turns a flush of its file system —
 * fsync, fdatasync, a journal commit — into REQ_PREFLUSH, which it serves with vfs_fsync on this file, which FUSE
 * sends here as FUSE_FSYNC; with --hdd it waits under the spindle's lock); --write-iops N and --write-bps N cap the
 * writes that reach this file, whichever process made them (a buffered write is written back by a kernel thread
 * that a cgroup v1 throttle does not count): a token bucket shared by every worker thread.
 *
 * A second file, "stats", reads as counters (reads, writes, bytes written, flushes): the proof that a flush
 * reaches this layer, and what tests measure against.
 *
 * Built by tuner at run time (gcc, libfuse3-dev); a C helper rather than Python so the per-read CPU cost
 * (microseconds) does not distort the latency on a small, loaded machine.
 *
 * usage: latencyfs BACKING MOUNTPOINT LATENCY_US [--hdd] [--flush-us N] [--write-iops N] [--write-bps N]
 */
#define FUSE_USE_VERSION 312
#include <fuse.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *FILE_PATH = "/disk.img";
static const char *STATS_PATH = "/stats";
static int backing_fd = -1;
static long long latency_us = 0;
static int hdd = 0;
static off_t head = 0;                 /* --hdd: where the previous read ended */
static pthread_mutex_t spindle = PTHREAD_MUTEX_INITIALIZER;

static long long flush_us = 0;         /* --flush-us */
static double write_iops = 0;          /* --write-iops: writes per second, 0 = no cap */
static double write_bps = 0;           /* --write-bps: bytes per second, 0 = no cap */
static volatile sig_atomic_t shaping = 0;  /* the write side is on (SIGUSR1) */
static pthread_mutex_t bucket = PTHREAD_MUTEX_INITIALIZER;
static double iops_next = 0, bps_next = 0; /* monotonic seconds from which the next write may start */
static atomic_llong n_reads, n_writes, n_write_bytes, n_flushes;

static void sleep_us(double us) {
    if (us <= 0) return;
    struct timespec ts = {(time_t)(us / 1e6), (long)((us - (double)(time_t)(us / 1e6) * 1e6) * 1e3)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A write's turn under the caps: each write books the next free slot of each bucket (1/IOPS seconds, and its bytes
 * at the byte rate), starting no earlier than now, and sleeps until the later of its slots. No burst is saved up
 * while idle, so over any stretch of back-to-back writes the rate is the cap. */
static void write_turn(size_t size) {
    if (!shaping || (write_iops <= 0 && write_bps <= 0)) return;
    pthread_mutex_lock(&bucket);
    double now = now_s(), start = now;
    if (write_iops > 0) {
        double slot = iops_next > now ? iops_next : now;
        iops_next = slot + 1.0 / write_iops;
        if (slot > start) start = slot;
    }
    if (write_bps > 0) {
        double slot = bps_next > now ? bps_next : now;
        bps_next = slot + (double)size / write_bps;
        if (slot > start) start = slot;
    }
    pthread_mutex_unlock(&bucket);
    sleep_us((start - now) * 1e6);
}

static off_t backing_size(void) {
    struct stat st;
    return fstat(backing_fd, &st) == 0 ? st.st_size : 0;
}

/* One spindle (7,200 rpm): a read that does not continue the previous one seeks (1 ms track to track, growing
 * with the square root of the distance to 15 ms across the whole file: the seek curve of Ruemmler & Wilkes,
 * "An introduction to disk drive modeling", IEEE Computer 1994) and waits half a rotation on average (4.17 ms);
 * every read transfers at 150 MB/s. */
static double hdd_delay_us(off_t offset, size_t size) {
    double us = (double)size / 150.0;  /* 150 MB/s = 150 bytes per microsecond */
    off_t distance = offset > head ? offset - head : head - offset;
    if (distance != 0) {
        off_t total = backing_size();
        double frac = total > 0 ? (double)distance / (double)total : 1.0;
        us += 1000.0 + 14000.0 * sqrt(frac > 1.0 ? 1.0 : frac) + 4170.0;
    }
    return us + (double)latency_us;
}

static int fs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    (void)fi;
    memset(st, 0, sizeof *st);
    if (strcmp(path, "/") == 0) {
        st->st_mode = S_IFDIR | 0700;
        st->st_nlink = 2;
        return 0;
    }
    if (strcmp(path, FILE_PATH) == 0) {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = backing_size();
        return 0;
    }
    if (strcmp(path, STATS_PATH) == 0) {
        st->st_mode = S_IFREG | 0400;
        st->st_nlink = 1;
        st->st_size = 4096;  /* read with direct I/O: the text is what read() returns, whatever this says */
        return 0;
    }
    return -ENOENT;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off, struct fuse_file_info *fi,
                      enum fuse_readdir_flags flags) {
    (void)off; (void)fi; (void)flags;
    if (strcmp(path, "/") != 0) return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, FILE_PATH + 1, NULL, 0, 0);
    fill(buf, STATS_PATH + 1, NULL, 0, 0);
    return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi) {
    if (strcmp(path, FILE_PATH) != 0 && strcmp(path, STATS_PATH) != 0) return -ENOENT;
    fi->direct_io = 1;    /* no page cache for this file: every read reaches read() below, and waits */
    fi->keep_cache = 0;
    return 0;
}

static int stats_read(char *buf, size_t size, off_t offset) {
    char text[256];
    int len = snprintf(text, sizeof text, "reads %lld\nwrites %lld\nwrite_bytes %lld\nflushes %lld\nshaping %d\n",
                       atomic_load(&n_reads), atomic_load(&n_writes), atomic_load(&n_write_bytes),
                       atomic_load(&n_flushes), (int)shaping);
    if (offset >= len) return 0;
    size_t n = (size_t)(len - offset) < size ? (size_t)(len - offset) : size;
    memcpy(buf, text + offset, n);
    return (int)n;
}

static int fs_read(const char *path, char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
    (void)fi;
    if (strcmp(path, STATS_PATH) == 0) return stats_read(buf, size, offset);
    atomic_fetch_add(&n_reads, 1);
    ssize_t n;
    if (hdd) {
        pthread_mutex_lock(&spindle);
        sleep_us(hdd_delay_us(offset, size));
        n = pread(backing_fd, buf, size, offset);
        head = offset + (off_t)size;
        pthread_mutex_unlock(&spindle);
    } else {
        sleep_us((double)latency_us);
        n = pread(backing_fd, buf, size, offset);
    }
    return n < 0 ? -errno : (int)n;
}

static int fs_write(const char *path, const char *buf, size_t size, off_t offset, struct fuse_file_info *fi) {
    (void)fi;
    if (strcmp(path, FILE_PATH) != 0) return -EACCES;
    write_turn(size);
    ssize_t n = pwrite(backing_fd, buf, size, offset);
    atomic_fetch_add(&n_writes, 1);
    if (n > 0) atomic_fetch_add(&n_write_bytes, (long long)n);
    return n < 0 ? -errno : (int)n;
}

/* The sandbox is thrown away after the run and never survives a host crash: a flush need not reach the disk, it
 * only takes the time a flush of the emulated disk takes. Flushes in flight wait side by side (a network
 * volume), except on a spindle, where the flush holds the head like a read. */
static int fs_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path; (void)datasync; (void)fi;
    atomic_fetch_add(&n_flushes, 1);
    if (!shaping || flush_us <= 0) return 0;
    if (hdd) {
        pthread_mutex_lock(&spindle);
        sleep_us((double)flush_us);
        pthread_mutex_unlock(&spindle);
    } else {
        sleep_us((double)flush_us);
    }
    return 0;
}

static void on_usr1(int sig) {
    (void)sig;
    shaping = 1;
}

static int fs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    (void)fi;
    if (strcmp(path, FILE_PATH) != 0) return -EACCES;  /* "stats" is no handle on the image */
    return ftruncate(backing_fd, size) == 0 ? 0 : -errno;
}

static void *fs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    /* Asynchronous direct I/O (the loop device's reads) travels as FUSE background requests, of which the kernel
     * keeps at most max_background in flight (default 12): raise it, or 16 parallel reads queue behind 12. */
    conn->max_background = 1024;
    conn->congestion_threshold = 1024;
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->attr_timeout = 3600;
    return NULL;
}

static const struct fuse_operations ops = {
    .getattr = fs_getattr,
    .readdir = fs_readdir,
    .open = fs_open,
    .read = fs_read,
    .write = fs_write,
    .fsync = fs_fsync,
    .truncate = fs_truncate,
    .init = fs_init,
};

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s BACKING MOUNTPOINT LATENCY_US [--hdd] [--flush-us N] [--write-iops N] "
                        "[--write-bps N]\n", argv[0]);
        return 2;
    }
    latency_us = atoll(argv[3]);
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--hdd") == 0) hdd = 1;
        else if (strcmp(argv[i], "--flush-us") == 0 && i + 1 < argc) flush_us = atoll(argv[++i]);
        else if (strcmp(argv[i], "--write-iops") == 0 && i + 1 < argc) write_iops = atof(argv[++i]);
        else if (strcmp(argv[i], "--write-bps") == 0 && i + 1 < argc) write_bps = atof(argv[++i]);
        else { fprintf(stderr, "latencyfs: unknown argument %s\n", argv[i]); return 2; }
    }
    /* Before the mount appears (tuner waits for it): a SIGUSR1 that came earlier would end the process. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0) { perror("sigaction"); return 1; }
    backing_fd = open(argv[1], O_RDWR);
    if (backing_fd < 0) { perror(argv[1]); return 1; }
    char *fargv[] = {argv[0], "-o", "allow_other,default_permissions,fsname=tuner-latencyfs,subtype=tuner",
                     NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
    struct fuse *fuse = fuse_new(&args, &ops, sizeof ops, NULL);
    if (fuse == NULL) return 1;
    if (fuse_mount(fuse, argv[2]) != 0) return 1;
    struct fuse_session *se = fuse_get_session(fuse);
    if (fuse_set_signal_handlers(se) != 0) return 1;
    /* One worker thread per read in flight: a sleeping worker must not hold up the next read. */
    struct fuse_loop_config *lcfg = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(lcfg, 512);
    fuse_loop_cfg_set_idle_threads(lcfg, 64);
    int rc = fuse_loop_mt(fuse, lcfg);
    fuse_loop_cfg_destroy(lcfg);
    fuse_remove_signal_handlers(se);
    fuse_unmount(fuse);
    fuse_destroy(fuse);
    return rc ? 1 : 0;
}
