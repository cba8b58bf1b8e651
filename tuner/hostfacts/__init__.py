"""What tuner reads about the host under a local PostgreSQL: which block device holds each directory and its
readahead (:mod:`.blockdev`, sysfs), the cgroup limits and memory (:mod:`.limits`) and what would stop io_uring
(:mod:`.iouring`). Files only (and one io_uring_setup of tuner's own); nothing on the host is written."""
