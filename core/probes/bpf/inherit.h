/* The fds of a loaded probe, closed in a forked child.
 *
 * A forked child inherits every fd of the parent's loaded probes. Its bpf links (and the
 * perf events under them) keep the uprobes attached, system-wide, for as long as any
 * descendant lives, and the detach helper's pipe keeps that helper (which holds more
 * links) alive too. The child never uses the parent's probe (start refuses it, free only
 * forgets it), so a pthread_atfork child handler closes those fds right after fork.
 * Closing, not detaching: libbpf's detach disables the perf events the parent still uses.
 */
#ifndef GT_BPF_INHERIT_H
#define GT_BPF_INHERIT_H

struct gt_probe_fds;

/**
 * gt_probe_fds__before() - note the fds open now, before a probe is loaded.
 * Returns 0 and sets *out, or -errno.
 */
int gt_probe_fds__before(struct gt_probe_fds **out);

/**
 * gt_probe_fds__after() - the probe is loaded: keep the fds opened since
 * gt_probe_fds__before() that are bpf objects or perf events, plus `extra` (the probe's
 * own pipes, eventfds, epoll fds: -1 entries are skipped), and register them to be
 * closed in a forked child. 0 or -errno (then nothing is registered).
 */
int gt_probe_fds__after(struct gt_probe_fds *f, const int *extra, int nextra);

/* How many fds are registered (tests, diagnostics). */
int gt_probe_fds__count(const struct gt_probe_fds *f);

/** gt_probe_fds__free() - unregister (the probe's own free closes them); accepts NULL. */
void gt_probe_fds__free(struct gt_probe_fds *f);

#endif /* GT_BPF_INHERIT_H */
