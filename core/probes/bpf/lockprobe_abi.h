/* SPDX-License-Identifier: MIT */
/* The records the lock-kind probe's BPF half (lockprobe.bpf.c) hands to its loader
 * (lockprobe.c). Free-threaded builds: what the parking-lot semaphores cannot say
 * (the address parked on and what it is; stop-the-world windows; the GC). Shared by
 * both halves, so: no includes, fixed-width kernel types (the includer provides them). */
#ifndef GT_LOCKPROBE_ABI_H
#define GT_LOCKPROBE_ABI_H

enum gtl_kind {
    GTL_PARK = 1,      /* _PyParkingLot_Park entry: addr = the address parked on */
    GTL_PARK_RET = 2,  /* its return: addr = the result (Py_PARK_OK 0, AGAIN -1, ...) */
    GTL_STW_BEGIN = 3, /* stop_the_world entry: addr = the _stoptheworld_state */
    GTL_STW_END = 4,   /* start_the_world return: the world runs again */
    GTL_GC_BEGIN = 5,  /* gc_collect_main entry */
    GTL_GC_END = 6,    /* gc_collect_main return */
};

enum gtl_flags {
    GTL_F_OBJECT = 1,    /* addr is &op->ob_mutex of an object whose type's type is `type`:
                            tname is that type's tp_name (a critical section on it) */
    GTL_F_SUSPENDED = 2, /* a park on an int (the thread's own tstate->state) expecting
                            _Py_THREAD_SUSPENDED: tstate_wait_attach, i.e. this thread
                            was stopped by a stop-the-world */
};

/* pycore_pystate.h (3.13, 3.14) */
#define GTL_THREAD_SUSPENDED 2

/* A free-threaded PyObject: ob_tid (8), ob_flags (2), ob_mutex (1), ob_gc_bits (1),
 * ob_ref_local (4), ob_ref_shared (8), ob_type (8); a PyTypeObject: PyVarObject (40)
 * then tp_name. */
#define GTL_OB_MUTEX_OFF 10
#define GTL_OB_TYPE_OFF 24
#define GTL_TP_NAME_OFF 40
#define GTL_TNAME_LEN 40

/* One event: 64 bytes. */
struct gtl_event {
    __u64 ts;   /* bpf_ktime_get_ns(): CLOCK_MONOTONIC ns */
    __u64 addr;
    __u32 tid;
    __u16 kind;  /* enum gtl_kind */
    __u16 flags; /* enum gtl_flags */
    char tname[GTL_TNAME_LEN];
};

#define GTL_RINGBUF_BYTES (16u << 20)

#endif /* GT_LOCKPROBE_ABI_H */
