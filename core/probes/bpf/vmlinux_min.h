/* SPDX-License-Identifier: MIT */
/* The few kernel types gilprobe.bpf.c needs, instead of a 2.8 MB generated
 * vmlinux.h. Kernel structs are declared with only the fields we read and marked
 * preserve_access_index: libbpf relocates every field access against the running
 * kernel's BTF at load time (CO-RE), so their layout here does not matter. UAPI
 * constants are copied from include/uapi/linux/bpf.h (stable ABI). */
#ifndef GT_VMLINUX_MIN_H
#define GT_VMLINUX_MIN_H
/* What a generated vmlinux.h defines: makes bpf_tracing.h use the kernel's
 * pt_regs field names (di, si, ...) rather than the user-space ones (rdi, ...). */
#define __VMLINUX_H__

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
enum { false = 0, true = 1 };
typedef int pid_t;

/* UAPI (include/uapi/linux/bpf.h). */
enum bpf_map_type {
    BPF_MAP_TYPE_HASH = 1,
    BPF_MAP_TYPE_ARRAY = 2,
    BPF_MAP_TYPE_PERCPU_ARRAY = 6,
    BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
    BPF_ANY = 0,
    BPF_NOEXIST = 1,
    BPF_EXIST = 2,
};

enum {
    BPF_RB_NO_WAKEUP = 1,
    BPF_RB_FORCE_WAKEUP = 2,
};

enum {
    BPF_RB_AVAIL_DATA = 0,
    BPF_RB_RING_SIZE = 1,
    BPF_RB_CONS_POS = 2,
    BPF_RB_PROD_POS = 3,
};

/* x86_64 struct pt_regs (arch/x86/include/asm/ptrace.h). The uprobe context; its
 * layout is user-visible ABI (same as user_regs_struct), so it is not relocated. */
struct pt_regs {
    unsigned long r15;
    unsigned long r14;
    unsigned long r13;
    unsigned long r12;
    unsigned long bp;
    unsigned long bx;
    unsigned long r11;
    unsigned long r10;
    unsigned long r9;
    unsigned long r8;
    unsigned long ax;
    unsigned long cx;
    unsigned long dx;
    unsigned long si;
    unsigned long di;
    unsigned long orig_ax;
    unsigned long ip;
    unsigned long cs;
    unsigned long flags;
    unsigned long sp;
    unsigned long ss;
};

typedef struct {
    int counter;
} __attribute__((preserve_access_index)) atomic_t;

struct signal_struct {
    atomic_t live; /* threads of the group not yet in do_exit() */
} __attribute__((preserve_access_index));

struct task_struct {
    pid_t pid;  /* thread id */
    pid_t tgid; /* process id */
    struct signal_struct *signal;
} __attribute__((preserve_access_index));

struct linux_binprm;

#endif /* GT_VMLINUX_MIN_H */
